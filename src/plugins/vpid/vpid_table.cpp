// The virtual-pid table's slots (vpid_table.h). Atomics only: no locks, no allocation, no libc.
#include "plugins/vpid/vpid_table.h"

#include "inject/fork_path.h"  // the lookups run in every fork child under a table: one code page

namespace revive::vpid {
namespace {

inline uint64_t pack(uint32_t virt, uint32_t real) { return uint64_t(virt) << 32 | real; }
inline uint32_t virt_part(uint64_t w) { return uint32_t(w >> 32); }
inline uint32_t real_part(uint64_t w) { return uint32_t(w); }
inline uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

}  // namespace

void Table::format(void* mem, uint32_t capacity) {
  auto* h = static_cast<Header*>(mem);
  for (int i = 0; i < 8; ++i) h->magic[i] = kMagic[i];
  h->version = kVersion;
  h->capacity = capacity;
  h->used = 0;
  h->next_fresh = kFreshBase;
  h->check = header_check(kVersion, capacity);
  h->gen = 0;
  auto* s = reinterpret_cast<uint64_t*>(h + 1);
  for (uint32_t i = 0; i < capacity; ++i) s[i] = 0;
}

const char* Table::validate(const void* mem, uint64_t bytes) {
  if (bytes < sizeof(Header)) return "too short for a virtual-pid table";
  auto* h = static_cast<const Header*>(mem);
  for (int i = 0; i < 8; ++i)
    if (h->magic[i] != kMagic[i]) return "not a virtual-pid table (bad magic)";
  if (h->version != kVersion) return "virtual-pid table of another version";
  if (h->capacity == 0 || h->capacity > (1u << 20) || h->check != header_check(h->version, h->capacity))
    return "damaged header";
  if (bytes != table_bytes(h->capacity)) return "size does not match its header";
  uint32_t used = __atomic_load_n(&h->used, __ATOMIC_ACQUIRE);
  if (used > h->capacity) return "damaged header (more slots used than it has)";
  auto* s = reinterpret_cast<const uint64_t*>(h + 1);
  for (uint32_t i = 0; i < used; ++i) {
    uint64_t w = load(&s[i]);
    if (w == 0) continue;
    if (virt_part(w) == 0 || real_part(w) == 0 || int32_t(real_part(w)) < 0 || int32_t(virt_part(w)) < 0)
      return "damaged entry";
  }
  return nullptr;
}

bool Table::insert(uint32_t virt, uint32_t real) {
  const uint64_t w = pack(virt, real);
  const uint32_t cap = h->capacity;
  for (;;) {
    uint32_t used = __atomic_load_n(&h->used, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < used && i < cap; ++i) {
      uint64_t zero = 0;
      if (load(&slot[i]) == 0 &&
          __atomic_compare_exchange_n(&slot[i], &zero, w, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&h->gen, 1, __ATOMIC_ACQ_REL);
        return true;
      }
    }
    if (used >= cap) return false;
    // Grow the high-water mark by one slot, then try to claim it (another inserter may win it: rescan).
    if (__atomic_compare_exchange_n(&h->used, &used, used + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      uint64_t zero = 0;
      if (__atomic_compare_exchange_n(&slot[used], &zero, w, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&h->gen, 1, __ATOMIC_ACQ_REL);
        return true;
      }
    }
  }
}

namespace {

// Index of the first entry whose virtual (by_virt) or real id is `id`, or -1; *word gets the entry.
REVIVE_FORK_PATH long find(const Header* h, const uint64_t* slot, uint32_t id, bool by_virt, uint64_t* word) {
  uint32_t used = __atomic_load_n(&h->used, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < used; ++i) {
    uint64_t w = load(&slot[i]);
    if (w != 0 && (by_virt ? virt_part(w) : real_part(w)) == id) {
      *word = w;
      return long(i);
    }
  }
  return -1;
}

bool remove_by(Header* h, uint64_t* slot, uint32_t id, bool by_virt) {
  for (;;) {
    uint64_t w = 0;
    long i = find(h, slot, id, by_virt, &w);
    if (i < 0) return false;
    if (__atomic_compare_exchange_n(&slot[i], &w, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      __atomic_add_fetch(&h->gen, 1, __ATOMIC_ACQ_REL);
      return true;
    }
  }
}

}  // namespace

bool Table::remove_real(uint32_t real) { return remove_by(h, slot, real, false); }
bool Table::remove_virt(uint32_t virt) { return remove_by(h, slot, virt, true); }

REVIVE_FORK_PATH uint32_t Table::real_of(uint32_t virt) const {
  uint64_t w = 0;
  return find(h, slot, virt, true, &w) >= 0 ? real_part(w) : 0;
}

REVIVE_FORK_PATH uint32_t Table::virt_of(uint32_t real) const {
  uint64_t w = 0;
  return find(h, slot, real, false, &w) >= 0 ? virt_part(w) : 0;
}

uint32_t Table::fresh() {
  for (;;) {
    uint32_t v = __atomic_fetch_add(&h->next_fresh, 1, __ATOMIC_ACQ_REL);
    if (v < kFreshBase || v > 0x7fff0000u) continue;  // wrapped (never in practice)
    if (real_of(v) == 0) return v;
  }
}

uint32_t Table::count() const {
  uint32_t used = __atomic_load_n(&h->used, __ATOMIC_ACQUIRE), n = 0;
  for (uint32_t i = 0; i < used; ++i) n += load(&slot[i]) != 0;
  return n;
}

}  // namespace revive::vpid
