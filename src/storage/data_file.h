// Writing and reading one checkpoint data file (format.h), checksummed chunk by chunk while streaming.
#ifndef REVIVE_STORAGE_DATA_FILE_H_
#define REVIVE_STORAGE_DATA_FILE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

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

class DataFileReader {
 public:
  // Opens `path` and validates its header and its size (truncated or extended files are errors).
  static Status Open(Env* env, const std::string& path, std::unique_ptr<DataFileReader>* out);
  const FileHeader& header() const { return h_; }
  const std::string& path() const { return path_; }
  // Reads the raw payload (header().raw_len bytes) into dst, verifying the checksum. Call once.
  Status ReadPayload(void* dst);
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
