// ErasureCode: a systematic erasure code over k data blocks and m parity blocks of equal length, the
// arithmetic under the erasure-coded checkpoint level (L3). Pure computation: no I/O, no MPI.
//
// m == 1 is XOR parity (RAID-5); m >= 2 is Reed-Solomon over GF(2^8) with ISA-L's Cauchy matrix, which
// is MDS: any k of the k + m blocks determine the others.
//
// The code detects nothing. A block marked present whose bytes are wrong (a flipped bit in a parity
// block, a torn write) is not noticed; it silently changes what Reconstruct() rebuilds. Callers must
// verify every block they mark present (a checksum from the manifest) and verify the rebuilt data again.
#ifndef REVIVE_STORAGE_ERASURE_H_
#define REVIVE_STORAGE_ERASURE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::storage {

class ErasureCode {
 public:
  // k >= 1 data blocks, m >= 1 parity blocks, k + m <= 255 (GF(2^8) has 255 nonzero elements).
  static Status Make(int k, int m, std::unique_ptr<ErasureCode>* out);

  ErasureCode(const ErasureCode&) = delete;
  ErasureCode& operator=(const ErasureCode&) = delete;

  int k() const { return k_; }
  int m() const { return m_; }

  // parity[j] (j < m) computed from data[0..k); every block is `len` bytes (any length, including 0).
  // Blocks may have any alignment (m == 1: xor_gen when all are 32-byte aligned, else the same ISA-L
  // table code as Reed-Solomon with every coefficient 1; equally fast).
  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;
  // Only parity[t] of Encode (t < m): a distributed encode's member computes just the row it keeps.
  void EncodeOne(size_t len, const uint8_t* const* data, int t, uint8_t* parity) const;

  // blocks[0..k+m): the data blocks, then the parity blocks, each `len` bytes; present[i] says which
  // hold valid bytes. Rebuilds every missing block (data and parity) in place and never writes a present
  // one. More than m missing: InvalidArgument. Thread-safe (the decode-table cache is locked).
  Status Reconstruct(size_t len, uint8_t* const* blocks, const std::vector<bool>& present) const;

 private:
  struct DecodePlan {
    std::vector<int> sources;  // the k present blocks read, ascending
    std::vector<int> targets;  // the missing blocks written, ascending
    std::vector<uint8_t> tables;  // ISA-L tables: targets.size() rows over the k sources
  };

  ErasureCode(int k, int m);
  // The plan for one erasure pattern (missing[i] for i < k + m), computed once and cached.
  Status Plan(const std::vector<bool>& missing, std::shared_ptr<const DecodePlan>* plan) const;

  const int k_, m_;
  std::vector<uint8_t> matrix_;      // (k + m) x k: identity over the Cauchy rows (m >= 2 only)
  std::vector<uint8_t> enc_tables_;  // ec_init_tables() of the parity rows (m == 1: all ones), 32 * k * m bytes
  mutable std::mutex mu_;
  mutable std::map<std::vector<bool>, std::shared_ptr<const DecodePlan>> plans_;  // guarded by mu_
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_ERASURE_H_
