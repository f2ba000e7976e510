// Double-buffered in-memory checkpoint of one window (issue 11; docs/rma.md "Double buffering").
//
// A checkpoint writes a rank's copy and its part of the group's XOR parity into the generation that is not
// the committed one; the committed one changes only after the checkpoint's last barrier, when every rank
// of the job has finished its parity exchange. A death at any moment (even inside a checkpoint, with the
// new generation half written) therefore leaves one generation complete at every survivor: the previous
// one is never touched before the new one is complete everywhere. Memory: two copies and two parity parts
// per window, i.e. 2·(1 + 1/(k-1)) times the window (k = group size) instead of 1 + 1/(k-1).
//
// Shared with the watcher thread (rank_watch.cc), which reads a generation while the program's thread may
// be writing the other one: the fields it needs are atomics, and the buffers of a generation are not
// resized after the window is registered.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace revive::rma {

// What each member records with its copy, handed to every member of its group with the parity: the copy's
// XXH3-64 (a rebuild is checked against it) and its order counters (a replay would resume from them).
struct MemberMeta {
  uint64_t xxh3 = 0, ec = 0, gc = 0, gnc = 0, seq = 0;
};

struct CkptGen {
  std::vector<uint8_t> copy;     // the window at this checkpoint, zero-padded to the group's largest
  std::vector<uint8_t> parity;   // this member's part of the group's XOR parity (xor_code.h)
  std::vector<MemberMeta> meta;  // by group rank
  std::atomic<uint64_t> ckpt{0};       // the window's checkpoint number this generation holds (0: none)
  std::atomic<bool> complete{false};   // parity and every member's meta received here
};

struct WinCkpt {
  uint32_t id = 0;
  size_t size = 0, padded = 0;
  CkptGen gen[2];
  std::atomic<int> current{-1};  // committed generation: every rank passed the checkpoint's last barrier
  int Next() const {
    const int c = current.load();
    return c < 0 ? 0 : 1 - c;
  }
  // The generation holding checkpoint `n` complete, or nullptr. Read as the watcher must: number, flag,
  // number again (the program's thread clears the flag before it changes the number).
  const CkptGen* Find(uint64_t n) const {
    for (const CkptGen& g : gen) {
      const uint64_t a = g.ckpt.load();
      const bool ok = g.complete.load();
      if (ok && a == n && g.ckpt.load() == a) return &g;
    }
    return nullptr;
  }
};

}  // namespace revive::rma
