#include "rma/access_log.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace revive::rma {

uint8_t* LogBuffer::Append(const Determinant& d) {
  const size_t need = RecordBytes(d);
  while (cur_ < blocks_.size() && blocks_[cur_].cap - blocks_[cur_].used < need) {
    ++cur_;
    if (cur_ < blocks_.size()) blocks_[cur_].used = 0;
  }
  if (cur_ == blocks_.size()) {
    Block b;
    b.cap = std::max<size_t>(need, size_t{1} << 20);
    b.mem.reset(new uint8_t[b.cap]);  // not value-initialised: no zero-fill
    blocks_.push_back(std::move(b));
  }
  Block& b = blocks_[cur_];
  uint8_t* at = b.mem.get() + b.used;
  std::memcpy(at, &d, sizeof d);
  if (need > sizeof d + DataBytes(d)) std::memset(at + sizeof d + DataBytes(d), 0, need - sizeof d - DataBytes(d));
  b.used += need;
  bytes_ += need;
  ++count_;
  return at + sizeof d;
}

void LogBuffer::Clear() {
  if (!blocks_.empty()) blocks_[0].used = 0;
  cur_ = 0;
  bytes_ = count_ = 0;
}

std::vector<uint8_t> LogBuffer::Contiguous() const {
  std::vector<uint8_t> out;
  out.reserve(bytes_);
  for (size_t i = 0; i <= cur_ && i < blocks_.size(); ++i)
    out.insert(out.end(), blocks_[i].mem.get(), blocks_[i].mem.get() + blocks_[i].used);
  return out;
}

bool ParseRecords(const uint8_t* p, size_t n, std::vector<RecordView>* out, std::string* error) {
  size_t off = 0;
  while (off < n) {
    if (n - off < sizeof(Determinant)) {
      *error = "log record at byte " + std::to_string(off) + " is truncated (" + std::to_string(n - off) +
               " bytes left, a header is " + std::to_string(sizeof(Determinant)) + ")";
      return false;
    }
    RecordView v;
    std::memcpy(&v.det, p + off, sizeof v.det);
    if (v.det.kind == 0 && n - off >= 8) {
      uint64_t w;
      std::memcpy(&w, p + off, 8);
      if (w == 0) return true;  // the terminator an append leaves after its records
    }
    if (v.det.kind < 1 || v.det.kind > 4 || v.det.len > (uint64_t{1} << 40)) {
      *error = "log record at byte " + std::to_string(off) + " is not a record (kind " +
               std::to_string(v.det.kind) + ", length " + std::to_string(v.det.len) + ")";
      return false;
    }
    const size_t rb = RecordBytes(v.det);
    if (rb > n - off) {
      *error = "log record at byte " + std::to_string(off) + " claims " + std::to_string(rb) +
               " bytes but only " + std::to_string(n - off) + " remain";
      return false;
    }
    v.data = p + off + sizeof(Determinant);
    out->push_back(v);
    off += rb;
  }
  return true;
}

void SortForReplay(std::vector<RecordView>* recs) {
  std::stable_sort(recs->begin(), recs->end(), [](const RecordView& a, const RecordView& b) {
    const auto& x = a.det;
    const auto& y = b.det;
    return std::tie(x.gnc, x.sc, x.origin, x.ec, x.seq) < std::tie(y.gnc, y.sc, y.origin, y.ec, y.seq);
  });
}

}  // namespace revive::rma
