// Calls that take a pid or tid of the computation and act on that process or thread: prlimit, the
// sched_* family, pidfd_open, process_vm_readv/writev. The id is translated to the kernel's (0 = the
// caller stays 0); nothing comes back as an id.
#include <sched.h>
extern "C" {  // glibc 2.36's <sys/pidfd.h> lacks __BEGIN_DECLS
#include <sys/pidfd.h>
}
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

inline pid_t R(pid_t p) { return vpid::active() ? vpid::to_real(p) : p; }

// Defines wrapper NAME(pid_t, ARGS...) that calls libc's NAME with the pid translated.
#define PID_FIRST(ret, name, params, args)              \
  using name##_fn = ret (*) params;                     \
  name##_fn g_##name;                                   \
  VPID_PRIME(g_##name, #name)                           \
  }                                                     \
  REVIVE_EXPORT ret name params noexcept {              \
    name##_fn f = next_or_enosys(&g_##name, #name);     \
    if (!f) return -1;                                  \
    return f args;                                      \
  }                                                     \
  namespace {

PID_FIRST(int, prlimit, (pid_t pid, enum __rlimit_resource res, const struct rlimit* nw, struct rlimit* old),
          (R(pid), res, nw, old))
PID_FIRST(int, prlimit64, (pid_t pid, enum __rlimit_resource res, const struct rlimit64* nw, struct rlimit64* old),
          (R(pid), res, nw, old))
PID_FIRST(int, sched_setaffinity, (pid_t pid, size_t n, const cpu_set_t* set), (R(pid), n, set))
PID_FIRST(int, sched_getaffinity, (pid_t pid, size_t n, cpu_set_t* set), (R(pid), n, set))
PID_FIRST(int, sched_setscheduler, (pid_t pid, int policy, const struct sched_param* p), (R(pid), policy, p))
PID_FIRST(int, sched_getscheduler, (pid_t pid), (R(pid)))
PID_FIRST(int, sched_setparam, (pid_t pid, const struct sched_param* p), (R(pid), p))
PID_FIRST(int, sched_getparam, (pid_t pid, struct sched_param* p), (R(pid), p))
PID_FIRST(int, sched_rr_get_interval, (pid_t pid, struct timespec* t), (R(pid), t))
PID_FIRST(int, pidfd_open, (pid_t pid, unsigned int flags), (R(pid), flags))
PID_FIRST(ssize_t, process_vm_readv,
          (pid_t pid, const struct iovec* l, unsigned long nl, const struct iovec* r, unsigned long nr,
           unsigned long flags),
          (R(pid), l, nl, r, nr, flags))
PID_FIRST(ssize_t, process_vm_writev,
          (pid_t pid, const struct iovec* l, unsigned long nl, const struct iovec* r, unsigned long nr,
           unsigned long flags),
          (R(pid), l, nl, r, nr, flags))

}  // namespace
