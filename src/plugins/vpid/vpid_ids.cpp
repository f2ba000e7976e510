// Wrappers that return or take this computation's ids: getpid (cached, no system call), getppid, gettid,
// getpgid/getpgrp, getsid, setpgid, tcgetpgrp/tcsetpgrp. Inactive (no table): straight to libc. The
// getters are asked again when a restore cut them (vpid::asked).
#include <sys/types.h>
#include <unistd.h>

#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

using PidFn = pid_t (*)();
using PidPidFn = pid_t (*)(pid_t);
using SetpgidFn = int (*)(pid_t, pid_t);
using TcgetFn = pid_t (*)(int);
using TcsetFn = int (*)(int, pid_t);
PidFn g_getpid, g_getppid, g_gettid, g_getpgrp;
PidPidFn g_getpgid, g_getsid;
SetpgidFn g_setpgid;
TcgetFn g_tcgetpgrp;
TcsetFn g_tcsetpgrp;
VPID_PRIME(g_getpid, "getpid")
VPID_PRIME(g_getppid, "getppid")
VPID_PRIME(g_gettid, "gettid")
VPID_PRIME(g_getpgrp, "getpgrp")
VPID_PRIME(g_getpgid, "getpgid")
VPID_PRIME(g_getsid, "getsid")
VPID_PRIME(g_setpgid, "setpgid")
VPID_PRIME(g_tcgetpgrp, "tcgetpgrp")
VPID_PRIME(g_tcsetpgrp, "tcsetpgrp")

pid_t call(PidFn* slot, const char* name) {
  PidFn f = next_or_enosys(slot, name);
  return f ? f() : -1;
}

pid_t call(PidPidFn* slot, const char* name, pid_t a) {
  PidPidFn f = next_or_enosys(slot, name);
  return f ? f(a) : -1;
}

}  // namespace

REVIVE_EXPORT pid_t getpid() noexcept {
  if (!vpid::active()) return call(&g_getpid, "getpid");
  return vpid::g_vpid;
}

REVIVE_EXPORT pid_t getppid() noexcept {
  return vpid::asked([] {
    pid_t r = call(&g_getppid, "getppid");
    return vpid::active() ? vpid::to_virt(r) : r;
  });
}

REVIVE_EXPORT pid_t gettid() noexcept {
  if (!vpid::active()) return call(&g_gettid, "gettid");
  return vpid::self_tid();
}

REVIVE_EXPORT pid_t getpgid(pid_t pid) noexcept {
  return vpid::asked([pid] {
    if (!vpid::active()) return call(&g_getpgid, "getpgid", pid);
    pid_t r = call(&g_getpgid, "getpgid", vpid::to_real(pid));
    return r > 0 ? vpid::to_virt(r) : r;
  });
}

REVIVE_EXPORT pid_t __getpgid(pid_t pid) noexcept { return getpgid(pid); }

REVIVE_EXPORT pid_t getpgrp() noexcept {
  return vpid::asked([] {
    pid_t r = call(&g_getpgrp, "getpgrp");
    return vpid::active() && r > 0 ? vpid::to_virt(r) : r;
  });
}

REVIVE_EXPORT pid_t getsid(pid_t pid) noexcept {
  return vpid::asked([pid] {
    if (!vpid::active()) return call(&g_getsid, "getsid", pid);
    pid_t r = call(&g_getsid, "getsid", vpid::to_real(pid));
    return r > 0 ? vpid::to_virt(r) : r;
  });
}

REVIVE_EXPORT int setpgid(pid_t pid, pid_t pgid) noexcept {
  SetpgidFn f = next_or_enosys(&g_setpgid, "setpgid");
  if (!f) return -1;
  if (!vpid::active()) return f(pid, pgid);
  return f(vpid::to_real(pid), vpid::to_real(pgid));
}

REVIVE_EXPORT pid_t tcgetpgrp(int fd) noexcept {
  TcgetFn f = next_or_enosys(&g_tcgetpgrp, "tcgetpgrp");
  if (!f) return -1;
  return vpid::asked([f, fd] {
    pid_t r = f(fd);
    return vpid::active() && r > 0 ? vpid::to_virt(r) : r;
  });
}

REVIVE_EXPORT int tcsetpgrp(int fd, pid_t pgrp) noexcept {
  TcsetFn f = next_or_enosys(&g_tcsetpgrp, "tcsetpgrp");
  if (!f) return -1;
  return f(fd, vpid::active() ? vpid::to_real(pgrp) : pgrp);
}
