// Writing and reading one checkpoint data file (format.h), checksummed chunk by chunk while streaming.
#ifndef REVIVE_STORAGE_DATA_FILE_H_
#define REVIVE_STORAGE_DATA_FILE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/env.h"
#include "storage/format.h"

namespace revive::storage {

struct Span {
  const void* data;
  size_t size;
};

// Writes header, the spans' bytes and the trailer to `path`, fsyncs and closes it. Uncompressed data is
// written straight from the spans (no copy); with compress_level > 0 it is zstd-compressed first.
// h.key/type_tag/elem_size/count must be set; lengths and flags are filled in here.
Status WriteDataFile(Env* env, const std::string& path, FileHeader h, const std::vector<Span>& spans,
                     int compress_level);

// One data file's bytes (the format above) as spans, for a writer that does not go through an Env file:
// the MPI-IO shared file (shared_file.h) concatenates each rank's records. Uncompressed payload spans
// point into the caller's memory (no copy). Not copyable or movable: spans point into head/packed/tail.
struct EncodedRecord {
  EncodedRecord() = default;
  EncodedRecord(const EncodedRecord&) = delete;
  EncodedRecord& operator=(const EncodedRecord&) = delete;
  std::string head, packed, tail;
  std::vector<Span> spans;  // head, payload..., tail
  uint64_t size = 0;        // sum of the spans
};
// Builds *out (h as for WriteDataFile). The payload checksum is computed here, one 256 KiB piece at a
// time; when `region` is given it is also fed every byte of the record, in order, in the same pass (the
// shared file's per-rank checksum), so the data is read from memory once for both.
Status EncodeDataRecord(const std::string& what, FileHeader h, const std::vector<Span>& spans,
                        int compress_level, EncodedRecord* out, Checksum64Stream* region);
// Parses the record at bytes[0, n) (a data file's image in memory): header, lengths, end marker and the
// payload checksum. `what` names it in errors ("<file>: rank 3's record 2"). On success *payload points
// into bytes and *consumed is the record's size (n may hold more records after it).
Status ParseDataRecord(const std::string& what, const char* bytes, size_t n, FileHeader* h,
                       const char** payload, size_t* consumed);
// Copies (or decompresses) a payload that ParseDataRecord accepted into dst (h.raw_len bytes).
Status DecodePayload(const std::string& what, const FileHeader& h, const char* payload, void* dst);

class DataFileReader {
 public:
  // Opens `path` and validates its header and its size (truncated or extended files are errors).
  static Status Open(Env* env, const std::string& path, std::unique_ptr<DataFileReader>* out);
  const FileHeader& header() const { return h_; }
  const std::string& path() const { return path_; }
  // Reads the raw payload (header().raw_len bytes) into dst, verifying the checksum. Call once.
  Status ReadPayload(void* dst);
  // Reads raw payload bytes [off, off + len) into dst. The payload checksum covers the whole payload, so
  // the whole file is still read (and checksummed) sequentially: the bytes outside the range go through a
  // chunk-sized buffer; a compressed payload is decompressed whole into a temporary buffer. Call once.
  Status ReadPayloadRange(uint64_t off, uint64_t len, void* dst);
  // Reads the payload only to verify its checksum (and, when compressed, that it decompresses to
  // raw_len bytes). Call once, instead of ReadPayload.
  Status Verify();

 private:
  DataFileReader() = default;
  Status ReadExact(void* buf, size_t n, const char* what);
  Status CheckTrailer(uint64_t checksum);
  Env* env_ = nullptr;
  std::string path_;
  FileHeader h_;
  std::unique_ptr<SequentialFile> f_;
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_DATA_FILE_H_
