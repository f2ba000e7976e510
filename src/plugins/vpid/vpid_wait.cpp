// The wait family: the pid (or -pgid) argument translated to the kernel's, the pid returned (and
// waitid's si_pid) back to the program's; a child that is reaped leaves the table.
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "inject/sys.h"
#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

using Wait4Fn = pid_t (*)(pid_t, int*, int, struct rusage*);
using WaitpidFn = pid_t (*)(pid_t, int*, int);
using WaitidFn = int (*)(idtype_t, id_t, siginfo_t*, int);
Wait4Fn g_wait4;
WaitpidFn g_waitpid;
WaitidFn g_waitid;
VPID_PRIME(g_waitpid, "waitpid")
VPID_PRIME(g_wait4, "wait4")
VPID_PRIME(g_waitid, "waitid")

// A pid the kernel returned with this status, in the incarnation `ep` (vpid.h, answered_in): the
// program's id; reaped unless stopped/continued.
pid_t back(pid_t r, int status, uint32_t ep) {
  if (r <= 0 || !vpid::active()) return r;
  pid_t v = vpid::to_virt_since(r, ep);
  if (!WIFSTOPPED(status) && !WIFCONTINUED(status)) vpid::reaped_since(r, ep);
  return v;
}

// waitpid/wait4 with the pid translated. A wait can block across a checkpoint and resume in the
// restored process (the kernel restarts the system call with the arguments it had): then the pid it was
// given is the old incarnation's kernel id (ECHILD: asked again with this incarnation's), and the pid it
// returns is this one's (translated even if no table was mapped when the call began). Or it returned
// just before the checkpoint cut the thread: then the pid is the old incarnation's (answered_in).
template <typename Call>
pid_t wait_for(pid_t pid, int* status, Call call) {
  for (;;) {
    const vpid::CallStart c = vpid::call_start();
    int st = 0;
    pid_t r = call(vpid::active() ? vpid::to_real_signed(pid) : pid, &st);
    const int err = errno;
    if (r < 0 && err == ECHILD && vpid::epoch() != c.ep && vpid::active()) continue;
    if (r > 0 && status) *status = st;
    r = back(r, st, vpid::answered_in(c));
    if (errno != err) errno = err;  // a store to the thread's page: after a fork, a copy-on-write fault
    return r;
  }
}

}  // namespace

REVIVE_EXPORT pid_t waitpid(pid_t pid, int* status, int options) {
  WaitpidFn f = next_or_enosys(&g_waitpid, "waitpid");
  if (!f) return -1;
  return wait_for(pid, status, [f, options](pid_t p, int* st) { return f(p, st, options); });
}

REVIVE_EXPORT pid_t wait(int* status) { return waitpid(-1, status, 0); }

REVIVE_EXPORT pid_t wait4(pid_t pid, int* status, int options, struct rusage* ru) {
  Wait4Fn f = next_or_enosys(&g_wait4, "wait4");
  if (!f) return -1;
  return wait_for(pid, status, [f, options, ru](pid_t p, int* st) { return f(p, st, options, ru); });
}

REVIVE_EXPORT pid_t wait3(int* status, int options, struct rusage* ru) { return wait4(-1, status, options, ru); }

namespace {

// waitid through `call` (libc's, or the raw system call with its rusage argument): the id translated,
// si_pid back; retried as in wait_for() after a checkpoint cut it.
template <typename Call>
int wait_id(idtype_t idtype, id_t id, siginfo_t* info, int options, Call call) {
  for (;;) {
    const vpid::CallStart c = vpid::call_start();
    id_t kid = id;
    if (vpid::active() && (idtype == P_PID || idtype == P_PGID) && id > 0) kid = id_t(vpid::to_real(pid_t(id)));
    int r = call(kid);
    const int err = errno;
    if (r < 0 && err == ECHILD && vpid::epoch() != c.ep && vpid::active()) continue;  // as in wait_for()
    if (r == 0 && info && info->si_pid > 0 && vpid::active()) {
      const uint32_t ep = vpid::answered_in(c);
      const pid_t real = info->si_pid;
      info->si_pid = vpid::to_virt_since(real, ep);
      const int code = info->si_code;
      if (!(options & WNOWAIT) && (code == CLD_EXITED || code == CLD_KILLED || code == CLD_DUMPED))
        vpid::reaped_since(real, ep);
    }
    errno = err;
    return r;
  }
}

}  // namespace

REVIVE_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t* info, int options) {
  WaitidFn f = next_or_enosys(&g_waitid, "waitid");
  if (!f) return -1;
  return wait_id(idtype, id, info, options, [&](id_t kid) { return f(idtype, kid, info, options); });
}

namespace revive::vpid {

// syscall(SYS_waitid, ...) also takes a struct rusage*, which libc's waitid() lacks.
int waitid_rusage(idtype_t idtype, id_t id, siginfo_t* info, int options, struct rusage* ru) {
  return wait_id(idtype, id, info, options, [&](id_t kid) {
    const long r = revive::inject::sys::sc(SYS_waitid, idtype, kid, info, options, ru);
    if (r < 0) errno = int(-r);
    return r < 0 ? -1 : int(r);
  });
}

}  // namespace revive::vpid
