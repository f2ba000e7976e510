// Removing the checkpoint signal from signal sets the program hands in (so it cannot block, wait for or
// consume it) and from sets handed back (so it cannot observe it). Shared by every signal wrapper.
#pragma once

#include <signal.h>

#include "plugins/signal/ksig.h"

namespace revive::plugins {

inline bool is_ckpt(int sig) { return sig != 0 && sig == ckpt_sig(); }

// Copy of a set without the checkpoint signal (nullptr stays nullptr).
inline const sigset_t* strip(const sigset_t* in, sigset_t* copy) {
  if (!in) return nullptr;
  *copy = *in;
  if (int s = ckpt_sig()) sigdelset(copy, s);
  return copy;
}

inline void hide(sigset_t* out) {
  if (!out) return;
  if (int s = ckpt_sig()) sigdelset(out, s);
}

}  // namespace revive::plugins
