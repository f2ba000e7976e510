// libc's syscall(nr, ...): programs ask for their ids with syscall(SYS_gettid), signal threads with
// syscall(SYS_tgkill, ...), open pidfds with syscall(SYS_pidfd_open, ...). The numbers whose named
// wrappers translate ids (vpid_ids, vpid_signal, vpid_wait, vpid_pidargs) are translated the same way;
// open/openat/getdents64 go through the path and listing wrappers; every other number goes to the
// kernel with its six arguments as given. An inline `syscall`
// instruction in the program is not seen (that would need seccomp).
//
// The library's own code (the plugins' raw calls, libstdc++'s futexes) must keep reaching the kernel
// with kernel ids: it is linked with --wrap=syscall (src/plugins/CMakeLists.txt), so its references
// bind to __wrap_syscall below, never to the exported wrapper.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "inject/sys.h"
#include "plugins/vpid/vpid.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
namespace vpid = revive::vpid;
using revive::inject::sys::call6;

// The kernel's -errno as libc's syscall() returns it: -1 with errno set.
inline long libc_result(long r) {
  if (__builtin_expect(static_cast<unsigned long>(r) > -4096UL, 0)) {
    errno = int(-r);
    return -1;
  }
  return r;
}

inline long R(long id) { return vpid::to_real(pid_t(id)); }
inline long V(long r) { return r > 0 ? vpid::to_virt(pid_t(r)) : r; }

// A siginfo the program fills itself (rt_sigqueueinfo): its sender pid is the program's view; the
// receiver's wrappers translate the kernel's back (vpid::virtual_siginfo).
long queue_info(long nr, long a, long b, long c, long d) {
  siginfo_t copy;
  const siginfo_t* in = reinterpret_cast<const siginfo_t*>(nr == SYS_rt_sigqueueinfo ? c : d);
  if (in) {
    memcpy(&copy, in, sizeof copy);
    if (copy.si_pid > 0) copy.si_pid = pid_t(R(copy.si_pid));
  }
  const long info = in ? reinterpret_cast<long>(&copy) : 0;
  if (nr == SYS_rt_sigqueueinfo) return call6(nr, R(a), b, info);
  return call6(nr, R(a), R(b), c, info);
}

// A table is mapped: the id-carrying numbers; -errno like the kernel, except the wait calls, which are
// the wait wrappers (libc convention, marked by `libc` = true).
long translated(long nr, long a, long b, long c, long d, long e, long f, bool* libc) {
  switch (nr) {
    case SYS_getpid: return vpid::g_vpid;
    case SYS_gettid: return vpid::self_tid();
    // Asked again if a restore cut them (vpid::asked); the table may be gone then (an exact-pid restart).
    case SYS_getppid:
    case SYS_getpgrp: return vpid::asked([nr] { return vpid::active() ? V(call6(nr)) : call6(nr); });
    case SYS_getpgid:
    case SYS_getsid: return vpid::asked([nr, a] { return vpid::active() ? V(call6(nr, R(a))) : call6(nr, a); });
    case SYS_setpgid: return call6(nr, R(a), R(b));
    case SYS_kill: return call6(nr, vpid::to_real_signed(pid_t(a)), b);
    case SYS_tkill: return call6(nr, R(a), b);
    case SYS_tgkill: return call6(nr, R(a), R(b), c);
    case SYS_rt_sigqueueinfo:
    case SYS_rt_tgsigqueueinfo: return queue_info(nr, a, b, c, d);
    case SYS_set_tid_address: call6(nr, a); return vpid::self_tid();
    case SYS_wait4:
      *libc = true;
      return wait4(pid_t(a), reinterpret_cast<int*>(b), int(c), reinterpret_cast<struct rusage*>(d));
    case SYS_waitid:
      *libc = true;
      return vpid::waitid_rusage(idtype_t(a), id_t(b), reinterpret_cast<siginfo_t*>(c), int(d),
                                 reinterpret_cast<struct rusage*>(e));
    // Paths and listings with ids in them: the named wrappers (vpid_proc.cpp, vpid_taskdir.cpp), which
    // also keep a file's checkpoint contents before it changes (files_pre).
    case SYS_open:
      *libc = true;
      return open(reinterpret_cast<const char*>(a), int(b), mode_t(c));
    case SYS_openat:
      *libc = true;
      return openat(int(a), reinterpret_cast<const char*>(b), int(c), mode_t(d));
    case SYS_getdents64:
      *libc = true;
      return getdents64(int(a), reinterpret_cast<void*>(b), size_t(c));
    case SYS_kcmp: return call6(nr, R(a), R(b), c, d, e);
    case SYS_ioprio_get:
    case SYS_ioprio_set:  // IOPRIO_WHO_PROCESS (1), IOPRIO_WHO_PGRP (2): `who` is an id
      return call6(nr, a, a == 1 || a == 2 ? R(b) : b, c);
    // The calls whose first argument is a pid or tid (0: the caller).
    case SYS_prlimit64:
    case SYS_sched_setaffinity:
    case SYS_sched_getaffinity:
    case SYS_sched_setscheduler:
    case SYS_sched_getscheduler:
    case SYS_sched_setparam:
    case SYS_sched_getparam:
    case SYS_sched_rr_get_interval:
    case SYS_sched_setattr:
    case SYS_sched_getattr:
    case SYS_pidfd_open:
    case SYS_process_vm_readv:
    case SYS_process_vm_writev:
    case SYS_get_robust_list:
    case SYS_migrate_pages:
    case SYS_move_pages: return call6(nr, R(a), b, c, d, e, f);
    default: return call6(nr, a, b, c, d, e, f);
  }
}

}  // namespace

// glibc's syscall() is the same: the six argument registers are passed on whatever the call takes
// (reading the ones the caller did not set is harmless: registers and the caller's frame).
#define SIX_ARGS(nr)                                                                        \
  va_list ap;                                                                               \
  va_start(ap, nr);                                                                         \
  const long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long),              \
             d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);              \
  va_end(ap)

REVIVE_EXPORT long syscall(long nr, ...) noexcept {
  SIX_ARGS(nr);
  if (!vpid::active()) return libc_result(call6(nr, a, b, c, d, e, f));
  bool libc = false;
  const long r = translated(nr, a, b, c, d, e, f, &libc);
  return libc ? r : libc_result(r);
}

// The library's own syscall() calls (--wrap=syscall): straight to the kernel, as libc's.
extern "C" __attribute__((visibility("hidden"))) long __wrap_syscall(long nr, ...) {
  SIX_ARGS(nr);
  return libc_result(call6(nr, a, b, c, d, e, f));
}
