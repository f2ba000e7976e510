#include "storage/distribution.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace revive::storage {

Status CheckTiling(const Distribution& d) {
  const std::string what = "key '" + d.key + "' (global size " + std::to_string(d.global_n) + ", " +
                           std::to_string(d.blocks.size()) + (d.blocks.size() == 1 ? " rank)" : " ranks)");
  if (d.unit == 0) return Status::InvalidArgument(what + ": unit of 0 elements");
  if (d.global_n > std::numeric_limits<uint64_t>::max() / d.unit)
    return Status::InvalidArgument(what + ": global size times unit overflows");
  // Sorted by offset, the blocks must follow each other without gap or overlap (empty blocks anywhere).
  std::vector<size_t> order(d.blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return d.blocks[a].offset < d.blocks[b].offset; });
  uint64_t next = 0;
  for (size_t r : order) {
    const Block& b = d.blocks[r];
    if (b.count == 0) continue;
    const std::string blk = "rank " + std::to_string(r) + "'s block [" + std::to_string(b.offset) + ", " +
                            std::to_string(b.offset + b.count) + ")";
    if (b.offset + b.count < b.offset) return Status::InvalidArgument(what + ": " + blk + " overflows");
    if (b.offset < next)
      return Status::InvalidArgument(what + ": blocks do not tile [0, " + std::to_string(d.global_n) + "): " + blk +
                                     " overlaps the blocks before it (which end at " + std::to_string(next) + ")");
    if (b.offset > next)
      return Status::InvalidArgument(what + ": blocks do not tile [0, " + std::to_string(d.global_n) +
                                     "): no rank holds [" + std::to_string(next) + ", " + std::to_string(b.offset) + ")");
    next = b.offset + b.count;
  }
  if (next != d.global_n)
    return Status::InvalidArgument(what + ": blocks do not tile [0, " + std::to_string(d.global_n) + "): " +
                                   (next < d.global_n ? "no rank holds [" + std::to_string(next) + ", " +
                                                            std::to_string(d.global_n) + ")"
                                                      : "the blocks end at " + std::to_string(next)));
  return Status::OK();
}

std::vector<Piece> Overlaps(const Distribution& old, const Block& mine) {
  std::vector<Piece> out;
  const uint64_t lo = mine.offset, hi = mine.offset + mine.count;
  for (size_t r = 0; r < old.blocks.size(); ++r) {
    const Block& b = old.blocks[r];
    const uint64_t a = std::max(lo, b.offset), e = std::min(hi, b.offset + b.count);
    if (a >= e) continue;
    out.push_back({static_cast<uint32_t>(r), a - b.offset, a - lo, e - a});
  }
  std::sort(out.begin(), out.end(), [](const Piece& x, const Piece& y) { return x.dst < y.dst; });
  return out;
}

}  // namespace revive::storage
