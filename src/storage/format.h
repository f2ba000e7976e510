// On-disk format of one checkpoint data file (<version dir>/<key>[.<rank>]):
//
//   offset  size
//   0       8    magic "RVVDATA\0"
//   8       4    format version (kFormatVersion)
//   12      4    header size = 64 + key length (payload offset)
//   16      4    type tag (revive::detail::TypeTag)
//   20      4    element size in bytes
//   24      8    element count
//   32      4    flags (kFlagZstd)
//   36      4    key length
//   40      8    payload length on disk
//   48      8    raw (uncompressed) payload length
//   56      8    XXH3-64 of bytes 0..55 and the key
//   64      n    key
//   ...          payload
//   end-16  8    XXH3-64 of the payload bytes as stored
//   end-8   8    end magic "RVVEND\0\0"
// All integers little-endian (the only byte order revive runs on; checked at compile time).
#ifndef REVIVE_STORAGE_FORMAT_H_
#define REVIVE_STORAGE_FORMAT_H_

#include <cstdint>
#include <string>

#include "core/status.h"

namespace revive::storage {

inline constexpr char kMagic[8] = {'R', 'V', 'V', 'D', 'A', 'T', 'A', '\0'};
inline constexpr char kEndMagic[8] = {'R', 'V', 'V', 'E', 'N', 'D', '\0', '\0'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kFixedHeaderSize = 64;
inline constexpr uint32_t kTrailerSize = 16;
inline constexpr uint32_t kFlagZstd = 1;
inline constexpr uint32_t kMaxKeyLength = 255;

struct FileHeader {
  uint32_t format_version = kFormatVersion;
  uint32_t type_tag = 0;
  uint32_t elem_size = 0;
  uint64_t count = 0;
  uint32_t flags = 0;
  uint64_t payload_len = 0;
  uint64_t raw_len = 0;
  std::string key;

  uint32_t header_size() const { return kFixedHeaderSize + static_cast<uint32_t>(key.size()); }
  uint64_t file_size() const { return header_size() + payload_len + kTrailerSize; }
};

std::string EncodeHeader(const FileHeader& h);
// Parses the first bytes of `path` (at least kFixedHeaderSize, plus the key). Errors name the file and
// say whether it is foreign, of another format version, or corrupt.
Status DecodeHeader(const std::string& path, const std::string& bytes, FileHeader* h);
std::string EncodeTrailer(uint64_t checksum);

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_FORMAT_H_
