// Lookups on the fast path: a completion's QP (by the device's QP number) and a request's memory region
// (by the program's lkey), per context. Open addressing, read without a lock: a table that grows is
// copied into a new one and the old one is kept, chained from the new one (never freed while the
// process runs), so a thread polling at that moment still reads valid memory. Removal leaves a
// tombstone. At a restart the QP table is refilled in place with the new QP numbers (no allocation while
// threads are held; it holds as many QPs as before).
#include <stdlib.h>
#include <string.h>

#include "plugins/verbs/verbs.h"

namespace revive::verbs {
namespace {

uint32_t slot_of(uint64_t key, uint32_t cap) { return uint32_t((key * 0x9e3779b97f4a7c15ull) >> 40) & (cap - 1); }

void insert(IdTable* t, uint64_t key, void* val) {
  for (uint32_t i = slot_of(key, t->cap);; i = (i + 1) & (t->cap - 1))
    if (t->s[i].key == 0 || t->s[i].key == key) {
      t->s[i].val = val;
      __atomic_store_n(&t->s[i].key, key, __ATOMIC_RELEASE);
      return;
    }
}

}  // namespace

void* index_get(const Index& x, uint64_t key) {
  const IdTable* t = __atomic_load_n(&x.t, __ATOMIC_ACQUIRE);
  if (!t) return nullptr;
  for (uint32_t i = slot_of(key, t->cap), k = 0; k < t->cap; i = (i + 1) & (t->cap - 1), ++k) {
    uint64_t s = __atomic_load_n(&t->s[i].key, __ATOMIC_ACQUIRE);
    if (s == 0) return nullptr;
    if (s == key) return t->s[i].val;
  }
  return nullptr;
}

bool index_put(Index* x, uint64_t key, void* val) {
  IdTable* t = x->t;
  if (!t || (x->used + 1) * 2 > t->cap) {  // grow (tombstones are dropped in the copy)
    uint32_t live = 0;
    for (uint32_t i = 0; t && i < t->cap; ++i) live += t->s[i].key && t->s[i].val ? 1 : 0;
    uint32_t cap = 64;
    while ((live + 1) * 4 > cap) cap *= 2;
    auto* n = static_cast<IdTable*>(calloc(1, sizeof(IdTable) + cap * sizeof(IdTable::Slot)));
    if (!n) return false;
    n->cap = cap;
    n->older = t;
    for (uint32_t i = 0; t && i < t->cap; ++i)
      if (t->s[i].key && t->s[i].val) insert(n, t->s[i].key, t->s[i].val);
    x->used = live;
    __atomic_store_n(&x->t, n, __ATOMIC_RELEASE);  // the old table stays allocated: readers may be in it
    t = n;
  }
  if (!index_get(*x, key)) ++x->used;
  insert(t, key, val);
  return true;
}

void index_del(Index* x, uint64_t key) {
  IdTable* t = x->t;
  for (uint32_t i = t ? slot_of(key, t->cap) : 0, k = 0; t && k < t->cap; i = (i + 1) & (t->cap - 1), ++k) {
    if (t->s[i].key == 0) return;
    if (t->s[i].key == key) {
      t->s[i].val = nullptr;  // a tombstone: the key stays so later keys are still found
      return;
    }
  }
}

void index_clear(Index* x) {
  IdTable* t = x->t;
  if (!t) return;
  memset(t->s, 0, t->cap * sizeof(IdTable::Slot));
  x->used = 0;
}

bool index_refill(Index* x, uint64_t key, void* val) {
  IdTable* t = x->t;
  if (!t || (x->used + 1) * 2 > t->cap) return false;
  ++x->used;
  insert(t, key, val);
  return true;
}

}  // namespace revive::verbs

namespace revive::verbs {

void index_free(Index* x) {
  for (IdTable* t = x->t; t;) {
    IdTable* o = t->older;
    free(t);
    t = o;
  }
  x->t = nullptr;
  x->used = 0;
}

}  // namespace revive::verbs
