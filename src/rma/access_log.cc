#include "rma/access_log.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace revive::rma {

uint8_t* LogBuffer::Append(const Determinant& d) {
  const size_t at = bytes_.size();
  bytes_.resize(at + RecordBytes(d));
  std::memcpy(bytes_.data() + at, &d, sizeof d);
  ++count_;
  return bytes_.data() + at + sizeof d;
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
