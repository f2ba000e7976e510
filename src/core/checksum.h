// XXH3-64 checksums, one-shot and streaming (data is checksummed chunk by chunk while it is written).
#ifndef REVIVE_CORE_CHECKSUM_H_
#define REVIVE_CORE_CHECKSUM_H_

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per file
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace revive {

inline uint64_t Checksum64(const void* p, size_t n) { return XXH3_64bits(p, n); }

class Checksum64Stream {
 public:
  Checksum64Stream() { XXH3_64bits_reset(&st_); }
  void Update(const void* p, size_t n) { XXH3_64bits_update(&st_, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(&st_); }

 private:
  XXH3_state_t st_;
};

}  // namespace revive

#endif  // REVIVE_CORE_CHECKSUM_H_
