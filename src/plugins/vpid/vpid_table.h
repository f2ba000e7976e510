// The virtual-pid table (docs/process-trees.md "Virtual pids"): (virtual, real) id pairs of a restored
// computation's processes and threads on this host, in a small shared file that `revive restart` creates
// when it cannot recreate pids (/dev/shm/revive-vpid-<uid>-<random>, mode 0600) and every process of the
// computation maps (REVIVE_VPID_TABLE names it). Lock-free: each slot is one 64-bit word, 0 = free,
// claimed and released with compare-and-swap; lookups scan the slots below the high-water mark. Only
// raw memory operations: usable in the injected library's restore path and in `revive restart`.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::vpid {

constexpr char kMagic[8] = {'R', 'V', 'V', 'P', 'I', 'D', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kCapacity = 8192;      // processes + threads + zombies of one host's part
// Ids handed out when a new process's or thread's real id equals a virtual id in use: above
// PID_MAX_LIMIT (4194304), so no kernel ever gives them to a process.
constexpr uint32_t kFreshBase = 4194305;
constexpr char kEnv[] = "REVIVE_VPID_TABLE";

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t capacity;
  uint32_t used;        // slots [0, used) have ever been claimed (atomic, only grows)
  uint32_t next_fresh;  // next candidate above kFreshBase (atomic)
  uint32_t check;       // ~(version ^ capacity ^ 0x56504944): catches a foreign file of the right size
  uint32_t gen;         // bumped by every insert and removal (atomic): lookups cached per thread while it holds
};
static_assert(sizeof(Header) == 32);

constexpr uint64_t table_bytes(uint32_t capacity) { return sizeof(Header) + uint64_t(capacity) * 8; }
constexpr uint32_t header_check(uint32_t version, uint32_t capacity) { return ~(version ^ capacity ^ 0x56504944u); }

// A mapped table: header then `capacity` slots of (uint64(virt) << 32 | real).
struct Table {
  Header* h = nullptr;
  uint64_t* slot = nullptr;

  bool mapped() const { return h != nullptr; }
  // Formats a mapping of table_bytes(capacity) bytes: header, every slot free.
  static void format(void* mem, uint32_t capacity);
  // Checks a mapping of `bytes` bytes: nullptr if it is a sound table, else what is wrong.
  static const char* validate(const void* mem, uint64_t bytes);
  void attach(void* mem) {
    h = static_cast<Header*>(mem);
    slot = reinterpret_cast<uint64_t*>(h + 1);
  }

  // Adds (virt, real). False when the table is full.
  bool insert(uint32_t virt, uint32_t real);
  // Removes the entry whose real id is `real` / virtual id is `virt` (if any). True if one was removed.
  bool remove_real(uint32_t real);
  bool remove_virt(uint32_t virt);
  // 0 when absent.
  uint32_t real_of(uint32_t virt) const;
  uint32_t virt_of(uint32_t real) const;
  // A virtual id in use by nobody (above kFreshBase).
  uint32_t fresh();
  uint32_t count() const;
};

}  // namespace revive::vpid
