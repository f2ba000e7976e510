#include "storage/format.h"

#include "core/checksum.h"


#include <bit>
#include <cstring>

namespace revive::storage {
static_assert(std::endian::native == std::endian::little, "revive's file formats are little-endian");

namespace {
template <class T>
void Put(std::string* s, size_t at, T v) {
  std::memcpy(s->data() + at, &v, sizeof v);
}
template <class T>
T Get(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}
uint64_t HeaderChecksum(const std::string& fixed56, const std::string& key) {
  Checksum64Stream st;
  st.Update(fixed56.data(), 56);
  st.Update(key.data(), key.size());
  return st.Digest();
}
}  // namespace

std::string EncodeHeader(const FileHeader& h) {
  std::string s(kFixedHeaderSize, '\0');
  std::memcpy(s.data(), kMagic, 8);
  Put<uint32_t>(&s, 8, h.format_version);
  Put<uint32_t>(&s, 12, h.header_size());
  Put<uint32_t>(&s, 16, h.type_tag);
  Put<uint32_t>(&s, 20, h.elem_size);
  Put<uint64_t>(&s, 24, h.count);
  Put<uint32_t>(&s, 32, h.flags);
  Put<uint32_t>(&s, 36, static_cast<uint32_t>(h.key.size()));
  Put<uint64_t>(&s, 40, h.payload_len);
  Put<uint64_t>(&s, 48, h.raw_len);
  Put<uint64_t>(&s, 56, HeaderChecksum(s, h.key));
  return s + h.key;
}

std::string EncodeTrailer(uint64_t checksum) {
  std::string s(kTrailerSize, '\0');
  Put<uint64_t>(&s, 0, checksum);
  std::memcpy(s.data() + 8, kEndMagic, 8);
  return s;
}

Status DecodeHeader(const std::string& path, const std::string& b, FileHeader* h) {
  if (b.empty()) return Status::Corruption(path + ": file is empty");
  if (b.size() < 8 || std::memcmp(b.data(), kMagic, 8) != 0)
    return Status::Corruption(path + ": not a revive checkpoint file (bad magic)");
  if (b.size() < kFixedHeaderSize)
    return Status::Corruption(path + ": truncated header (" + std::to_string(b.size()) + " bytes)");
  h->format_version = Get<uint32_t>(b, 8);
  if (h->format_version != kFormatVersion)
    return Status::Corruption(path + ": file format version " + std::to_string(h->format_version) +
                              " is not supported (this build reads version " +
                              std::to_string(kFormatVersion) + ")");
  uint32_t key_len = Get<uint32_t>(b, 36);
  if (key_len > kMaxKeyLength || Get<uint32_t>(b, 12) != kFixedHeaderSize + key_len)
    return Status::Corruption(path + ": corrupt header (bad key length)");
  if (b.size() < kFixedHeaderSize + key_len) return Status::Corruption(path + ": truncated header");
  h->key.assign(b.data() + kFixedHeaderSize, key_len);
  if (Get<uint64_t>(b, 56) != HeaderChecksum(b.substr(0, 56), h->key))
    return Status::Corruption(path + ": header checksum mismatch");
  h->type_tag = Get<uint32_t>(b, 16);
  h->elem_size = Get<uint32_t>(b, 20);
  h->count = Get<uint64_t>(b, 24);
  h->flags = Get<uint32_t>(b, 32);
  h->payload_len = Get<uint64_t>(b, 40);
  h->raw_len = Get<uint64_t>(b, 48);
  if (h->flags & ~kFlagZstd) return Status::Corruption(path + ": unknown flags in header");
  if (!(h->flags & kFlagZstd) && h->payload_len != h->raw_len)
    return Status::Corruption(path + ": corrupt header (payload length differs from raw length)");
  return Status::OK();
}

}  // namespace revive::storage
