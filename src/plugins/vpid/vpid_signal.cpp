// Wrappers that send signals to ids of the computation: kill (a pid, -pgid, 0, -1), killpg, tgkill,
// sigqueue. The virtual ids are translated to the kernel's; an id the computation never had passes
// through unchanged, so it fails as natively (ESRCH).
#include <signal.h>
#include <sys/types.h>

#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

using KillFn = int (*)(pid_t, int);
using TgkillFn = int (*)(pid_t, pid_t, int);
using SigqueueFn = int (*)(pid_t, int, const union sigval);
KillFn g_kill, g_killpg;
TgkillFn g_tgkill;
SigqueueFn g_sigqueue;
VPID_PRIME(g_kill, "kill")
VPID_PRIME(g_killpg, "killpg")
VPID_PRIME(g_tgkill, "tgkill")
VPID_PRIME(g_sigqueue, "sigqueue")

}  // namespace

REVIVE_EXPORT int kill(pid_t pid, int sig) noexcept {
  KillFn f = next_or_enosys(&g_kill, "kill");
  if (!f) return -1;
  // kill(pid, 0) only asks whether pid exists: asked again if a restore came between the translation and
  // the call (vpid::asked). A signal sent is never sent twice.
  if (sig == 0) return vpid::asked([f, pid] { return f(vpid::active() ? vpid::to_real_signed(pid) : pid, 0); });
  return f(vpid::active() ? vpid::to_real_signed(pid) : pid, sig);
}

REVIVE_EXPORT int killpg(pid_t pgrp, int sig) noexcept {
  KillFn f = next_or_enosys(&g_killpg, "killpg");
  if (!f) return -1;
  return f(vpid::active() && pgrp > 0 ? vpid::to_real(pgrp) : pgrp, sig);
}

REVIVE_EXPORT int tgkill(pid_t tgid, pid_t tid, int sig) noexcept {
  TgkillFn f = next_or_enosys(&g_tgkill, "tgkill");
  if (!f) return -1;
  if (!vpid::active()) return f(tgid, tid, sig);
  return f(vpid::to_real(tgid), vpid::to_real(tid), sig);
}

REVIVE_EXPORT int sigqueue(pid_t pid, int sig, const union sigval value) noexcept {
  SigqueueFn f = next_or_enosys(&g_sigqueue, "sigqueue");
  if (!f) return -1;
  return f(vpid::active() ? vpid::to_real(pid) : pid, sig, value);
}
