#include "storage/distribution.h"

#include "storage/text_fields.h"

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

const Distribution* Layouts::Find(const std::string& key) const {
  for (const auto& d : distributed)
    if (d.key == key) return &d;
  return nullptr;
}

bool Layouts::IsReplicated(const std::string& key) const {
  return std::find(replicated.begin(), replicated.end(), key) != replicated.end();
}

void Layouts::Encode(std::string* s) const {
  for (const auto& d : distributed) {
    *s += "dist=" + d.key + " " + std::to_string(d.global_n) + " " + std::to_string(d.unit);
    for (const auto& b : d.blocks) *s += " " + std::to_string(b.offset) + ":" + std::to_string(b.count);
    *s += "\n";
  }
  for (const auto& k : replicated) *s += "replicated=" + k + "\n";
}

bool Layouts::ParseLine(const std::string& k, const std::string& v) {
  if (k == "replicated") {
    replicated.push_back(v);
    return !v.empty();
  }
  if (k != "dist") return false;
  std::vector<std::string> f;
  for (size_t pos = 0; pos <= v.size();) {
    size_t sp = v.find(' ', pos);
    if (sp == std::string::npos) sp = v.size();
    f.push_back(v.substr(pos, sp - pos));
    pos = sp + 1;
  }
  Distribution d;
  if (f.size() < 3 || f[0].empty() || !ParseU64(f[1], &d.global_n) || !ParseU64(f[2], &d.unit)) return false;
  d.key = f[0];
  for (size_t i = 3; i < f.size(); ++i) {
    size_t c = f[i].find(':');
    Block b;
    if (c == std::string::npos || !ParseU64(f[i].substr(0, c), &b.offset) || !ParseU64(f[i].substr(c + 1), &b.count))
      return false;
    d.blocks.push_back(b);
  }
  distributed.push_back(std::move(d));
  return true;
}

Status Layouts::Check(const std::string& what, uint32_t ranks, const std::vector<std::string>& keys) const {
  auto is_key = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  // A restart with another number of ranks trusts these layouts to find its bytes: check them here.
  for (const auto& d : distributed) {
    if (!is_key(d.key) || Find(d.key) != &d)
      return Status::Corruption(what + ": dist= line for key '" + d.key + "' that is not a key, or twice");
    if (d.blocks.size() != ranks)
      return Status::Corruption(what + ": key '" + d.key + "' has " + std::to_string(d.blocks.size()) +
                                " blocks for " + std::to_string(ranks) + " ranks");
    Status ts = CheckTiling(d);
    if (!ts.ok()) return Status::Corruption(what + ": " + ts.message());
  }
  for (const auto& k : replicated)
    if (!is_key(k) || Find(k) || std::count(replicated.begin(), replicated.end(), k) != 1)
      return Status::Corruption(what + ": replicated= line for key '" + k + "' that is not a key, twice, or distributed");
  return Status::OK();
}

}  // namespace revive::storage
