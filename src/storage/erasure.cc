#include "storage/erasure.h"

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace revive::storage {
namespace {

// ISA-L's length arguments are int; longer blocks are coded in pieces of this size.
constexpr size_t kMaxPiece = size_t{1} << 30;
// Distinct erasure patterns whose decode tables are kept; a long job sees few (one per failure).
constexpr size_t kMaxPlans = 256;

bool Aligned32(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 31) == 0; }

// ec_encode_data over blocks of any length (ISA-L takes an int length).
void Code(size_t len, int k, int rows, const uint8_t* tables, const uint8_t* const* src, uint8_t* const* dst) {
  std::vector<uint8_t*> s(k), d(rows);
  for (size_t off = 0; off < len; off += kMaxPiece) {
    const size_t c = std::min(kMaxPiece, len - off);
    for (int i = 0; i < k; ++i) s[i] = const_cast<uint8_t*>(src[i]) + off;
    for (int i = 0; i < rows; ++i) d[i] = dst[i] + off;
    ec_encode_data(static_cast<int>(c), k, rows, const_cast<uint8_t*>(tables), s.data(), d.data());
  }
}

// dst = XOR of the k sources. xor_gen wants 32-byte aligned pointers, a length that is a multiple of 32
// and two or more sources; whatever it cannot take goes to ec_encode_data with every coefficient 1
// (multiplying by 1 in GF(2^8) is the identity, so that is XOR too, and as fast on unaligned blocks).
void Xor(size_t len, const uint8_t* const* src, int k, const uint8_t* ones_tables, uint8_t* dst) {
  if (k == 1) {
    std::memcpy(dst, src[0], len);
    return;
  }
  bool aligned = Aligned32(dst);
  for (int i = 0; i < k && aligned; ++i) aligned = Aligned32(src[i]);
  size_t done = 0;
  if (aligned) {
    std::vector<void*> v(k + 1);
    const size_t bulk = len & ~size_t{31};
    while (done < bulk) {
      const size_t c = std::min(kMaxPiece, bulk - done);
      for (int i = 0; i < k; ++i) v[i] = const_cast<uint8_t*>(src[i]) + done;
      v[k] = dst + done;
      if (xor_gen(k + 1, static_cast<int>(c), v.data()) != 0) break;  // refused: the tables do the rest
      done += c;
    }
  }
  if (done == len) return;
  std::vector<const uint8_t*> rest(k);
  for (int i = 0; i < k; ++i) rest[i] = src[i] + done;
  uint8_t* out = dst + done;
  Code(len - done, k, 1, ones_tables, rest.data(), &out);
}

}  // namespace

Status ErasureCode::Make(int k, int m, std::unique_ptr<ErasureCode>* out) {
  if (k < 1 || m < 1 || k + m > 255)
    return Status::InvalidArgument("erasure code with k=" + std::to_string(k) + " data and m=" + std::to_string(m) +
                                   " parity blocks: need k >= 1, m >= 1 and k + m <= 255");
  out->reset(new ErasureCode(k, m));
  return Status::OK();
}

ErasureCode::ErasureCode(int k, int m) : k_(k), m_(m) {
  if (m_ == 1) {  // XOR: one parity row of ones, for the blocks xor_gen cannot take
    const std::vector<uint8_t> ones(k_, 1);
    enc_tables_.resize(32 * static_cast<size_t>(k_));
    ec_init_tables(k_, 1, const_cast<uint8_t*>(ones.data()), enc_tables_.data());
    return;
  }
  matrix_.resize(static_cast<size_t>(k_ + m_) * k_);
  gf_gen_cauchy1_matrix(matrix_.data(), k_ + m_, k_);
  enc_tables_.resize(32 * static_cast<size_t>(k_) * m_);
  ec_init_tables(k_, m_, matrix_.data() + static_cast<size_t>(k_) * k_, enc_tables_.data());
}

void ErasureCode::Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  if (len == 0) return;
  if (m_ == 1) {
    Xor(len, data, k_, enc_tables_.data(), parity[0]);
    return;
  }
  Code(len, k_, m_, enc_tables_.data(), data, parity);
}

void ErasureCode::EncodeOne(size_t len, const uint8_t* const* data, int t, uint8_t* parity) const {
  if (len == 0) return;
  if (m_ == 1) {
    Xor(len, data, k_, enc_tables_.data(), parity);
    return;
  }
  Code(len, k_, 1, enc_tables_.data() + 32 * static_cast<size_t>(k_) * t, data, &parity);  // ISA-L: 32 k bytes a row
}

Status ErasureCode::Plan(const std::vector<bool>& missing, std::shared_ptr<const DecodePlan>* plan) const {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = plans_.find(missing);
    if (it != plans_.end()) {
      *plan = it->second;
      return Status::OK();
    }
  }
  auto p = std::make_shared<DecodePlan>();
  const int n = k_ + m_;
  for (int i = 0; i < n; ++i) {
    if (missing[i])
      p->targets.push_back(i);
    else if (static_cast<int>(p->sources.size()) < k_)
      p->sources.push_back(i);
  }
  // The rows of the sources form an invertible k x k matrix (every k rows of a Cauchy code do); its
  // inverse maps the sources back to the data, and a parity row times the inverse maps them to parity.
  const size_t k = k_;
  std::vector<uint8_t> sub(k * k), inv(k * k);
  for (size_t r = 0; r < k; ++r) std::memcpy(&sub[r * k], &matrix_[p->sources[r] * k], k);
  if (gf_invert_matrix(sub.data(), inv.data(), k_) != 0)
    return Status::Corruption("erasure code k=" + std::to_string(k_) + " m=" + std::to_string(m_) +
                              ": the surviving blocks' matrix is singular (cannot happen for a Cauchy code)");
  std::vector<uint8_t> rows(p->targets.size() * k);
  for (size_t t = 0; t < p->targets.size(); ++t) {
    const size_t x = p->targets[t];
    uint8_t* row = &rows[t * k];
    if (x < k) {
      std::memcpy(row, &inv[x * k], k);
      continue;
    }
    for (size_t c = 0; c < k; ++c) {
      uint8_t s = 0;
      for (size_t l = 0; l < k; ++l) s ^= gf_mul(matrix_[x * k + l], inv[l * k + c]);
      row[c] = s;
    }
  }
  p->tables.resize(32 * k * p->targets.size());
  ec_init_tables(k_, static_cast<int>(p->targets.size()), rows.data(), p->tables.data());
  std::lock_guard<std::mutex> l(mu_);
  if (plans_.size() >= kMaxPlans) plans_.clear();
  plans_.emplace(missing, p);
  *plan = std::move(p);
  return Status::OK();
}

Status ErasureCode::Reconstruct(size_t len, uint8_t* const* blocks, const std::vector<bool>& present) const {
  const int n = k_ + m_;
  if (static_cast<int>(present.size()) != n)
    return Status::InvalidArgument("erasure code k=" + std::to_string(k_) + " m=" + std::to_string(m_) + ": " +
                                   std::to_string(present.size()) + " presence flags for " + std::to_string(n) +
                                   " blocks");
  std::vector<bool> missing(n);
  int lost = 0;
  for (int i = 0; i < n; ++i) {
    missing[i] = !present[i];
    lost += missing[i] ? 1 : 0;
  }
  if (lost > m_)
    return Status::InvalidArgument(std::to_string(lost) + " of " + std::to_string(n) +
                                   " blocks are missing; the erasure code (k=" + std::to_string(k_) +
                                   ", m=" + std::to_string(m_) + ") tolerates at most " + std::to_string(m_));
  if (lost == 0 || len == 0) return Status::OK();
  if (m_ == 1) {  // the one missing block is the XOR of the k others
    std::vector<const uint8_t*> src;
    int target = 0;
    for (int i = 0; i < n; ++i) {
      if (missing[i])
        target = i;
      else
        src.push_back(blocks[i]);
    }
    Xor(len, src.data(), k_, enc_tables_.data(), blocks[target]);
    return Status::OK();
  }
  std::shared_ptr<const DecodePlan> plan;
  Status s = Plan(missing, &plan);
  if (!s.ok()) return s;
  std::vector<const uint8_t*> src(k_);
  std::vector<uint8_t*> dst(plan->targets.size());
  for (int i = 0; i < k_; ++i) src[i] = blocks[plan->sources[i]];
  for (size_t t = 0; t < dst.size(); ++t) dst[t] = blocks[plan->targets[t]];
  Code(len, k_, static_cast<int>(dst.size()), plan->tables.data(), src.data(), dst.data());
  return Status::OK();
}

}  // namespace revive::storage
