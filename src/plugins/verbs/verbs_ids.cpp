// Translation of the ids a program holds (those of the first run: virtual) to the current device's and
// back. Filled at a restart from what every process of the computation published (verbs_ckpt.cpp); an id
// not in a table is its own translation (objects made after the last restart have real = virtual ids).
// Tables live in memory from mmap (they are filled while user threads are held: no malloc) and are
// saved with the process like any other memory.
#include <string.h>
#include <sys/mman.h>

#include "plugins/verbs/verbs.h"

namespace revive::verbs {
namespace {

struct Map {  // open addressing, u64 -> u64, no deletion (cleared at every restart)
  struct E {
    uint64_t k, v;
  };
  E* e;
  uint32_t cap, n;
};

constexpr uint32_t kMapCap = 1u << 16;
constexpr uint64_t kEmpty = ~uint64_t(0);

struct Gid {
  ibv_gid v, r;
  uint16_t vlid;
};
constexpr int kMaxGids = 256;

struct Tables {
  uint16_t* lid_v2r;  // 65536 entries each, 0 = identity
  uint16_t* lid_r2v;
  Map qpn, qpn_rev, rkey;
  Gid gids[kMaxGids];
  int ngids;
};
Tables t;

void* map_mem(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

bool map_init(Map* m) {
  if (!m->e) {
    m->e = static_cast<Map::E*>(map_mem(size_t(kMapCap) * sizeof(Map::E)));
    if (!m->e) return false;
    m->cap = kMapCap;
  }
  memset(m->e, 0xff, size_t(m->cap) * sizeof(Map::E));
  m->n = 0;
  return true;
}

uint32_t slot(const Map& m, uint64_t k) {
  uint64_t h = k * 0x9e3779b97f4a7c15ull;
  return uint32_t(h >> 40) & (m.cap - 1);
}

bool map_put(Map* m, uint64_t k, uint64_t v) {
  if (!m->e || m->n + 1 >= m->cap / 2) return false;
  for (uint32_t i = slot(*m, k);; i = (i + 1) & (m->cap - 1)) {
    if (m->e[i].k == kEmpty) {
      m->e[i] = {k, v};
      ++m->n;
      return true;
    }
    if (m->e[i].k == k) {
      m->e[i].v = v;
      return true;
    }
  }
}

bool map_get(const Map& m, uint64_t k, uint64_t* v) {
  if (!m.e || m.n == 0) return false;
  for (uint32_t i = slot(m, k);; i = (i + 1) & (m.cap - 1)) {
    if (m.e[i].k == kEmpty) return false;
    if (m.e[i].k == k) {
      *v = m.e[i].v;
      return true;
    }
  }
}

uint64_t key(uint16_t lid, uint32_t id) { return (uint64_t(lid) << 32) | id; }

}  // namespace

void ids_clear() {
  if (!t.lid_v2r) {
    t.lid_v2r = static_cast<uint16_t*>(map_mem(65536 * sizeof(uint16_t)));
    t.lid_r2v = static_cast<uint16_t*>(map_mem(65536 * sizeof(uint16_t)));
  }
  if (t.lid_v2r) memset(t.lid_v2r, 0, 65536 * sizeof(uint16_t));
  if (t.lid_r2v) memset(t.lid_r2v, 0, 65536 * sizeof(uint16_t));
  map_init(&t.qpn);
  map_init(&t.qpn_rev);
  map_init(&t.rkey);
  t.ngids = 0;
}

bool ids_put_lid(uint16_t vlid, uint16_t rlid) {
  if (!t.lid_v2r || !t.lid_r2v) return false;
  t.lid_v2r[vlid] = rlid;
  t.lid_r2v[rlid] = vlid;
  return true;
}

bool ids_put_gid(const ibv_gid& v, const ibv_gid& r, uint16_t vlid) {
  for (int i = 0; i < t.ngids; ++i)
    if (memcmp(&t.gids[i].v, &v, sizeof v) == 0) {
      t.gids[i].r = r;
      t.gids[i].vlid = vlid;
      return true;
    }
  if (t.ngids == kMaxGids) return false;
  t.gids[t.ngids++] = {v, r, vlid};
  return true;
}

bool ids_put_qpn(uint16_t vlid, uint32_t vqpn, uint16_t rlid, uint32_t rqpn) {
  return map_put(&t.qpn, key(vlid, vqpn), rqpn) && map_put(&t.qpn_rev, key(rlid, rqpn), vqpn);
}

bool ids_put_rkey(uint16_t vlid, uint32_t vrkey, uint32_t rrkey) { return map_put(&t.rkey, key(vlid, vrkey), rrkey); }

uint16_t lid_to_real(uint16_t vlid) {
  uint16_t r = t.lid_v2r ? t.lid_v2r[vlid] : 0;
  return r ? r : vlid;
}

uint16_t lid_to_virtual(uint16_t rlid) {
  uint16_t v = t.lid_r2v ? t.lid_r2v[rlid] : 0;
  return v ? v : rlid;
}

uint32_t qpn_to_real(uint16_t vlid, uint32_t vqpn) {
  uint64_t v;
  return map_get(t.qpn, key(vlid, vqpn), &v) ? uint32_t(v) : vqpn;
}

uint32_t qpn_to_virtual(uint16_t rlid, uint32_t rqpn) {
  uint64_t v;
  return map_get(t.qpn_rev, key(rlid, rqpn), &v) ? uint32_t(v) : rqpn;
}

uint32_t rkey_to_real(uint16_t vlid, uint32_t vrkey) {
  uint64_t v;
  return map_get(t.rkey, key(vlid, vrkey), &v) ? uint32_t(v) : vrkey;
}

bool gid_to_real(const ibv_gid& v, ibv_gid* r) {
  for (int i = 0; i < t.ngids; ++i)
    if (memcmp(&t.gids[i].v, &v, sizeof v) == 0) {
      *r = t.gids[i].r;
      return true;
    }
  return false;
}

bool gid_to_virtual(const ibv_gid& r, ibv_gid* v) {
  for (int i = 0; i < t.ngids; ++i)
    if (memcmp(&t.gids[i].r, &r, sizeof r) == 0) {
      *v = t.gids[i].v;
      return true;
    }
  return false;
}

uint16_t gid_vlid(const ibv_gid& vgid) {
  for (int i = 0; i < t.ngids; ++i)
    if (memcmp(&t.gids[i].v, &vgid, sizeof vgid) == 0) return t.gids[i].vlid;
  return 0;
}

}  // namespace revive::verbs
