// Raw signal syscalls (the kernel's struct sigaction, 8-byte sets). The plugin uses them on the
// checkpoint and restore paths, where the libc wrappers would go through our own interposed sigaction.
#pragma once

#include <signal.h>
#include <stdint.h>

namespace revive::plugins {

constexpr int kMaxSig = 64;

struct KSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

int ksigaction(int sig, const KSigaction* act, KSigaction* old);
uint64_t ksigpending();
// Dequeues one pending instance of sig without waiting; false when none is pending.
bool ktake(int sig, siginfo_t* info);
int kqueue_self(const siginfo_t& info);

inline uint64_t sigbit(int sig) { return uint64_t{1} << (sig - 1); }

// The engine's checkpoint signal, or 0 when it reports none.
int ckpt_sig();

}  // namespace revive::plugins
