#include "storage/stripes.h"

#include <algorithm>
#include <cstring>

namespace revive::storage {

StripeLayout::StripeLayout(int g, int m, uint64_t max_len) : g_(g), m_(m) {
  const uint64_t k = static_cast<uint64_t>(g - m);
  const uint64_t per_block = (max_len + k - 1) / k;
  block_ = (per_block + 63) / 64 * 64;  // 64: ISA-L's vector width, and cache lines stay unshared
}

int StripeLayout::slot_index(int i, int s) const {
  int n = 0;
  for (int x = 0; x < s; ++x) n += ((i - x) % g_ + g_) % g_ < m_;
  return n;
}

int StripeLayout::block_index(int i, int s) const { return s - slot_index(i, s); }

std::vector<std::pair<int, int>> StripeLayout::data_blocks(int s) const {
  std::vector<std::pair<int, int>> out;
  for (int p = 0; p < k(); ++p) {
    const int i = (s + m_ + p) % g_;
    out.emplace_back(i, block_index(i, s));
  }
  return out;
}

std::vector<std::pair<int, int>> StripeLayout::parity_slots(int i) const {
  std::vector<std::pair<int, int>> out;
  for (int s = 0; s < g_; ++s) {
    const int t = ((i - s) % g_ + g_) % g_;
    if (t < m_) out.emplace_back(s, t);
  }
  return out;
}

namespace {

// A stripe is coded in column pieces of this many bytes (a multiple of 64), so the zero-padding of blocks
// that run past their member's end needs only a piece-sized scratch, not a copy of whole blocks.
constexpr uint64_t kPiece = 256 << 10;

// One piece of one stripe's blocks as the code sees them, over the members' buffers. A piece of a block
// that runs past its member's length is a zero-padded copy in scratch; one wholly past it is a shared zero
// piece, which the code only reads (it writes missing blocks only, and those are never padded).
class StripeBlocks {
 public:
  StripeBlocks(const StripeLayout& l, std::vector<uint8_t*> data, std::vector<uint64_t> len,
               std::vector<uint8_t*> parity)
      : l_(l), data_(std::move(data)), len_(std::move(len)), parity_(std::move(parity)),
        piece_(std::min(kPiece, l.block_size())), zero_(piece_), pad_(piece_ * l.k()), blocks_(l.g()),
        slot_(l.g() * l.m()) {
    for (int i = 0; i < l.g(); ++i) {
      int x = 0;
      for (auto [s, t] : l.parity_slots(i)) slot_[s * l.m() + t] = x++;
    }
  }

  uint64_t piece() const { return piece_; }

  // blocks[0..k) the data, blocks[k..g) the parity of stripe s, bytes [off, off + n) of each block.
  uint8_t* const* Get(int s, uint64_t off, uint64_t n) {
    const uint64_t B = l_.block_size();
    const auto db = l_.data_blocks(s);
    for (int p = 0; p < l_.k(); ++p) {
      const auto [i, j] = db[p];
      const uint64_t at = static_cast<uint64_t>(j) * B + off;  // in member i's buffer
      if (at + n <= len_[i]) {
        blocks_[p] = data_[i] + at;
      } else if (at >= len_[i]) {
        blocks_[p] = zero_.data();
      } else {
        uint8_t* pad = pad_.data() + p * piece_;
        std::memcpy(pad, data_[i] + at, len_[i] - at);
        std::memset(pad + (len_[i] - at), 0, at + n - len_[i]);
        blocks_[p] = pad;
      }
    }
    for (int t = 0; t < l_.m(); ++t)
      blocks_[l_.k() + t] = parity_[l_.parity_holder(s, t)] + slot_[s * l_.m() + t] * B + off;
    return blocks_.data();
  }

 private:
  const StripeLayout& l_;
  std::vector<uint8_t*> data_;
  std::vector<uint64_t> len_;
  std::vector<uint8_t*> parity_;
  uint64_t piece_;
  std::vector<uint8_t> zero_, pad_;
  std::vector<uint8_t*> blocks_;
  std::vector<int> slot_;  // [s * m + t]: position of stripe s's parity t among its holder's slots
};

std::string Shape(const StripeLayout& l) {
  return "group g=" + std::to_string(l.g()) + " m=" + std::to_string(l.m());
}

Status CheckShape(const ErasureCode& code, const StripeLayout& l, size_t members) {
  if (code.k() != l.k() || code.m() != l.m())
    return Status::InvalidArgument(Shape(l) + ": the erasure code has k=" + std::to_string(code.k()) + " m=" +
                                   std::to_string(code.m()) + ", the layout k=" + std::to_string(l.k()));
  if (members != static_cast<size_t>(l.g()))
    return Status::InvalidArgument(Shape(l) + ": got " + std::to_string(members) + " members");
  return Status::OK();
}

Status CheckLength(const StripeLayout& l, int i, uint64_t len) {
  if (len > l.block_size() * l.k())
    return Status::InvalidArgument(Shape(l) + ": member " + std::to_string(i) + " has " + std::to_string(len) +
                                   " bytes, more than the layout's " + std::to_string(l.block_size() * l.k()));
  return Status::OK();
}

}  // namespace

Status EncodeGroup(const ErasureCode& code, const StripeLayout& layout, const std::vector<std::string_view>& member_data,
                   std::vector<std::string>* parity_out) {
  return EncodeGroupFor(code, layout, member_data, -1, parity_out);
}

Status EncodeGroupFor(const ErasureCode& code, const StripeLayout& layout, const std::vector<std::string_view>& member_data,
                      int holder, std::vector<std::string>* parity_out) {
  Status st = CheckShape(code, layout, member_data.size());
  const int g = layout.g();
  std::vector<uint8_t*> data(g), parity(g);
  std::vector<uint64_t> len(g);
  parity_out->resize(g);
  for (int i = 0; i < g && st.ok(); ++i) {
    st = CheckLength(layout, i, member_data[i].size());
    data[i] = reinterpret_cast<uint8_t*>(const_cast<char*>(member_data[i].data()));  // only read
    len[i] = member_data[i].size();
    (*parity_out)[i].resize(layout.m() * layout.block_size());
    parity[i] = reinterpret_cast<uint8_t*>((*parity_out)[i].data());
  }
  if (!st.ok()) return st;
  StripeBlocks sb(layout, data, len, parity);
  const uint64_t B = layout.block_size();
  for (int s = 0; s < g; ++s) {
    bool mine = holder < 0;
    for (int t = 0; t < layout.m() && !mine; ++t) mine = layout.parity_holder(s, t) == holder;
    if (!mine) continue;  // a stripe whose parity `holder` does not keep
    for (uint64_t off = 0; off < B; off += sb.piece()) {
      const uint64_t n = std::min(sb.piece(), B - off);
      uint8_t* const* b = sb.Get(s, off, n);
      code.Encode(n, b, b + layout.k());
    }
  }
  return Status::OK();
}

Status RebuildGroup(const ErasureCode& code, const StripeLayout& layout, std::vector<std::string>* member_data,
                    const std::vector<uint64_t>& lengths, std::vector<std::string>* parity,
                    const std::vector<bool>& member_present) {
  const int g = layout.g();
  Status st = CheckShape(code, layout, lengths.size());
  if (st.ok() && (member_present.size() != lengths.size() || member_data->size() != lengths.size() ||
                  parity->size() != lengths.size()))
    st = Status::InvalidArgument(Shape(layout) + ": " + std::to_string(lengths.size()) + " lengths, " +
                                 std::to_string(member_present.size()) + " presence flags, " +
                                 std::to_string(member_data->size()) + " data and " +
                                 std::to_string(parity->size()) + " parity buffers");
  if (!st.ok()) return st;
  const uint64_t parity_len = layout.m() * layout.block_size();
  int lost = 0;
  for (int i = 0; i < g && st.ok(); ++i) {
    st = CheckLength(layout, i, lengths[i]);
    if (!member_present[i]) {
      ++lost;
    } else if ((*member_data)[i].size() != lengths[i] || (*parity)[i].size() != parity_len) {
      st = Status::InvalidArgument(Shape(layout) + ": member " + std::to_string(i) + " has " +
                                   std::to_string((*member_data)[i].size()) + " data and " +
                                   std::to_string((*parity)[i].size()) + " parity bytes; expected " +
                                   std::to_string(lengths[i]) + " and " + std::to_string(parity_len));
    }
  }
  if (!st.ok()) return st;
  if (lost > layout.m())
    return Status::InvalidArgument(std::to_string(lost) + " of " + std::to_string(g) + " members of the " +
                                   Shape(layout) + " are lost; it tolerates at most " + std::to_string(layout.m()));
  if (lost == 0) return Status::OK();
  // Lost members are rebuilt whole (k blocks, padding included) in their own buffers, then trimmed.
  std::vector<uint8_t*> data(g), par(g);
  std::vector<uint64_t> len(g);
  for (int i = 0; i < g; ++i) {
    std::string& d = (*member_data)[i];
    if (!member_present[i]) {
      d.resize(layout.k() * layout.block_size());
      (*parity)[i].resize(parity_len);
    }
    data[i] = reinterpret_cast<uint8_t*>(d.data());
    len[i] = d.size();
    par[i] = reinterpret_cast<uint8_t*>((*parity)[i].data());
  }
  StripeBlocks sb(layout, data, len, par);
  std::vector<bool> present(g);
  for (int s = 0; s < g; ++s) {
    const auto db = layout.data_blocks(s);
    for (int p = 0; p < layout.k(); ++p) present[p] = member_present[db[p].first];
    for (int t = 0; t < layout.m(); ++t) present[layout.k() + t] = member_present[layout.parity_holder(s, t)];
    for (uint64_t off = 0; off < layout.block_size(); off += sb.piece()) {
      const uint64_t n = std::min(sb.piece(), layout.block_size() - off);
      st = code.Reconstruct(n, sb.Get(s, off, n), present);
      if (!st.ok()) return st;
    }
  }
  for (int i = 0; i < g; ++i)
    if (!member_present[i]) (*member_data)[i].resize(lengths[i]);
  return Status::OK();
}

}  // namespace revive::storage
