#include "rma/xor_code.h"

#include <cstring>

namespace revive::rma {

size_t ChunkBytes(size_t bytes, int k) {
  const size_t parts = static_cast<size_t>(k - 1);
  return (bytes + parts - 1) / parts;
}

namespace {
// Chunk t of `data` into dst (zero-padded past the end of data).
void CopyChunk(const uint8_t* data, size_t bytes, size_t c, int t, uint8_t* dst) {
  const size_t off = static_cast<size_t>(t) * c;
  const size_t n = off >= bytes ? 0 : (bytes - off < c ? bytes - off : c);
  if (n) std::memcpy(dst, data + off, n);
  if (n < c) std::memset(dst + n, 0, c - n);
}
}  // namespace

void ParityContribution(const uint8_t* data, size_t bytes, int k, int me, uint8_t* out, size_t stride) {
  const size_t c = ChunkBytes(bytes, k);
  if (stride == 0) stride = c;
  for (int j = 0; j < k; ++j) {
    uint8_t* slot = out + static_cast<size_t>(j) * stride;
    if (j == me)
      std::memset(slot, 0, c);
    else
      CopyChunk(data, bytes, c, ChunkIndex(me, j, k), slot);
  }
}

void RebuildContribution(const uint8_t* data, size_t bytes, const uint8_t* parity, int k, int me, int f,
                         uint8_t* out) {
  const size_t c = ChunkBytes(bytes, k);
  for (int t = 0; t < k - 1; ++t) {
    uint8_t* slot = out + static_cast<size_t>(t) * c;
    const int j = ParityHolder(f, t, k);
    if (j == me)
      std::memcpy(slot, parity, c);
    else
      CopyChunk(data, bytes, c, ChunkIndex(me, j, k), slot);
  }
}

}  // namespace revive::rma
