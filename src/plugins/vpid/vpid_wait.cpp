// The wait family: the pid (or -pgid) argument translated to the kernel's, the pid returned (and
// waitid's si_pid) back to the program's; a child that is reaped leaves the table.
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"

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

// A pid the kernel returned with this status: the program's id; reaped unless stopped/continued.
pid_t back(pid_t r, int status) {
  if (r <= 0) return r;
  pid_t v = vpid::to_virt(r);
  if (!WIFSTOPPED(status) && !WIFCONTINUED(status)) vpid::reaped(r);
  return v;
}

}  // namespace

REVIVE_EXPORT pid_t waitpid(pid_t pid, int* status, int options) {
  WaitpidFn f = next_or_enosys(&g_waitpid, "waitpid");
  if (!f) return -1;
  if (!vpid::active()) return f(pid, status, options);
  int st = 0;
  pid_t r = f(vpid::to_real_signed(pid), &st, options);
  if (r > 0 && status) *status = st;
  return back(r, st);
}

REVIVE_EXPORT pid_t wait(int* status) { return waitpid(-1, status, 0); }

REVIVE_EXPORT pid_t wait4(pid_t pid, int* status, int options, struct rusage* ru) {
  Wait4Fn f = next_or_enosys(&g_wait4, "wait4");
  if (!f) return -1;
  if (!vpid::active()) return f(pid, status, options, ru);
  int st = 0;
  pid_t r = f(vpid::to_real_signed(pid), &st, options, ru);
  if (r > 0 && status) *status = st;
  return back(r, st);
}

REVIVE_EXPORT pid_t wait3(int* status, int options, struct rusage* ru) { return wait4(-1, status, options, ru); }

REVIVE_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t* info, int options) {
  WaitidFn f = next_or_enosys(&g_waitid, "waitid");
  if (!f) return -1;
  if (!vpid::active()) return f(idtype, id, info, options);
  if ((idtype == P_PID || idtype == P_PGID) && id > 0) id = id_t(vpid::to_real(pid_t(id)));
  int r = f(idtype, id, info, options);
  if (r == 0 && info && info->si_pid > 0) {
    const pid_t real = info->si_pid;
    info->si_pid = vpid::to_virt(real);
    const int c = info->si_code;
    if (!(options & WNOWAIT) && (c == CLD_EXITED || c == CLD_KILLED || c == CLD_DUMPED)) vpid::reaped(real);
  }
  return r;
}
