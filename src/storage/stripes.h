// StripeLayout: how one redundancy group's checkpoints are cut into erasure-coded stripes (RAID-5/6 with
// rotated parity, like SCR's redset), so that every member stores the same amount of parity and losing
// any m members loses at most m blocks of every stripe.
//
// A group has g members (0..g-1), m parity blocks per stripe, k = g - m data blocks per stripe and g
// stripes. Member i's buffer (L_i bytes) is cut into k blocks of B = round_up(ceil(Lmax / k), 64) bytes,
// Lmax = max L_i, zero-padded past L_i. Stripe s holds parity t (t < m) on member (s + t) % g; the other
// k members contribute one data block each, member i its j-th block to the j-th stripe (ascending s) in
// which it holds no parity. So each member holds m parity blocks: m * B bytes.
//
// EncodeGroup/RebuildGroup do the whole group in memory (tests, offline tools). Like ErasureCode they
// detect nothing: a wrong byte in a surviving member's data or parity silently changes what is rebuilt,
// so callers verify survivors and rebuilt members against their checksums.
#ifndef REVIVE_STORAGE_STRIPES_H_
#define REVIVE_STORAGE_STRIPES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "storage/erasure.h"

namespace revive::storage {

class StripeLayout {
 public:
  // Precondition: 1 <= m < g <= 255.
  StripeLayout(int g, int m, uint64_t max_len);

  int g() const { return g_; }
  int m() const { return m_; }
  int k() const { return g_ - m_; }
  uint64_t block_size() const { return block_; }

  // The member holding parity t of stripe s.
  int parity_holder(int s, int t) const { return (s + t) % g_; }
  // The data members of stripe s in the order the code sees them (position p = 0..k-1: members
  // (s + m + p) % g), each with the index j of its block in this stripe.
  std::vector<std::pair<int, int>> data_blocks(int s) const;
  // The (stripe s, parity index t) pairs whose parity member i holds, ascending s: member i's parity
  // bytes are these slots' blocks in this order.
  std::vector<std::pair<int, int>> parity_slots(int i) const;

 private:
  int block_index(int i, int s) const;  // j of member i's block in stripe s (i holds no parity there)
  int slot_index(int i, int s) const;   // position of stripe s among member i's parity slots

  int g_, m_;
  uint64_t block_;
};

// parity_out[i] = member i's parity: its parity_slots(i) blocks concatenated (m * B bytes). member_data
// has g entries, none longer than the layout's max_len. Strings already of the right size are reused.
Status EncodeGroup(const ErasureCode& code, const StripeLayout& layout, const std::vector<std::string_view>& member_data,
                   std::vector<std::string>* parity_out);

// EncodeGroup for one member that keeps only its own parity: only the stripes in which `holder` holds a
// parity block are encoded (m of g), so (*parity_out)[holder] is exact and the others' buffers partial.
// holder < 0: every stripe (EncodeGroup).
Status EncodeGroupFor(const ErasureCode& code, const StripeLayout& layout, const std::vector<std::string_view>& member_data,
                      int holder, std::vector<std::string>* parity_out);

// Rebuilds the data (resized to lengths[i]) and the parity (m * B bytes) of every member i with
// !member_present[i] from the others' data and parity. lengths holds all g true lengths (the lost ones
// come from metadata); present members' data and parity must have exactly those sizes. More than m lost:
// InvalidArgument naming how many are lost and how many the group tolerates.
Status RebuildGroup(const ErasureCode& code, const StripeLayout& layout, std::vector<std::string>* member_data,
                    const std::vector<uint64_t>& lengths, std::vector<std::string>* parity,
                    const std::vector<bool>& member_present);

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_STRIPES_H_
