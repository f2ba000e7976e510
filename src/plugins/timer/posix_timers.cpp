#include "plugins/timer/posix_timers.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"

#ifndef PR_TIMER_CREATE_RESTORE_IDS  // uapi of Linux 6.16; Debian 12's headers predate it
#define PR_TIMER_CREATE_RESTORE_IDS 77
#define PR_TIMER_CREATE_RESTORE_IDS_OFF 0
#define PR_TIMER_CREATE_RESTORE_IDS_ON 1
#endif

namespace revive::plugins {
namespace {

// A table slot is claimed with a compare-and-swap, never a lock: save runs while user threads are
// suspended, possibly inside timer_create.
enum : int { kFree = 0, kFilling = 1, kLive = 2 };
struct Slot {
  int state;
  int kid;  // kernel timer id (glibc's timer_t for SIGEV_SIGNAL/SIGEV_NONE timers)
  int clock;
  int notify;
  int signo;
  int64_t value;  // sigev_value
};
constexpr int kMaxTimers = 256;
Slot g_slots[kMaxTimers];
int g_untracked;  // timers the table could not describe (SIGEV_THREAD, SIGEV_THREAD_ID, table full)

using CreateFn = int (*)(clockid_t, struct sigevent*, timer_t*);
using DeleteFn = int (*)(timer_t);
CreateFn g_create;
DeleteFn g_delete;

void track(int kid, clockid_t clock, const struct sigevent* sev) {
  for (auto& s : g_slots) {
    int expect = kFree;
    if (!__atomic_compare_exchange_n(&s.state, &expect, kFilling, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) continue;
    s.kid = kid;
    s.clock = clock;
    // No sigevent means SIGEV_SIGNAL, SIGALRM, sival_int = the timer id (timer_create(2)).
    s.notify = sev ? sev->sigev_notify : SIGEV_SIGNAL;
    s.signo = sev ? sev->sigev_signo : SIGALRM;
    s.value = sev ? reinterpret_cast<intptr_t>(sev->sigev_value.sival_ptr) : kid;
    __atomic_store_n(&s.state, kLive, __ATOMIC_RELEASE);
    return;
  }
  __atomic_add_fetch(&g_untracked, 1, __ATOMIC_RELAXED);
}

void untrack(int kid) {
  for (auto& s : g_slots)
    if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) == kLive && s.kid == kid) {
      __atomic_store_n(&s.state, kFree, __ATOMIC_RELEASE);
      return;
    }
}

struct Saved {
  int32_t kid, clock, notify, signo;
  int64_t value;
  int64_t v_sec, v_nsec, i_sec, i_nsec;
};

int recreate(const Saved& t, bool explicit_ids, char* msg, size_t cap) {
  char line[160];
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = t.notify;
  sev.sigev_signo = t.signo;
  sev.sigev_value.sival_ptr = reinterpret_cast<void*>(static_cast<intptr_t>(t.value));
  int id = t.kid;  // with PR_TIMER_CREATE_RESTORE_IDS the kernel reads the wanted id from here
  if (syscall(SYS_timer_create, t.clock, &sev, &id) != 0) {
    int e = errno;
    return fail(msg, cap, Msg(line, sizeof line).s("POSIX timer ").i(t.kid).s(": cannot recreate: ").err(e), e);
  }
  if (id != t.kid) {
    syscall(SYS_timer_delete, id);
    return fail(msg, cap, Msg(line, sizeof line).s("POSIX timer ").i(t.kid).s(": the kernel gave id ").i(id)
        .s(explicit_ids ? "" : " (kernel without PR_TIMER_CREATE_RESTORE_IDS)"), EEXIST);
  }
  struct itimerspec its = {{t.i_sec, t.i_nsec}, {t.v_sec, t.v_nsec}};
  if ((t.v_sec || t.v_nsec) && syscall(SYS_timer_settime, id, 0, &its, nullptr) != 0) {
    int e = errno;
    return fail(msg, cap, Msg(line, sizeof line).s("POSIX timer ").i(t.kid).s(": cannot re-arm: ").err(e), e);
  }
  track(id, t.clock, &sev);
  return 0;
}

}  // namespace

int posix_timers_init() {
  next_symbol(&g_create, "timer_create");
  next_symbol(&g_delete, "timer_delete");
  return 0;
}

bool posix_timers_save(Out& out) {
  uint32_t n = 0;
  for (auto& s : g_slots) n += __atomic_load_n(&s.state, __ATOMIC_ACQUIRE) == kLive ? 1 : 0;
  out.u32(n);
  for (auto& s : g_slots) {
    if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) != kLive || n == 0) continue;
    struct itimerspec its = {};
    syscall(SYS_timer_gettime, s.kid, &its);  // a timer deleted behind our back saves as disarmed
    Saved t = {s.kid, s.clock, s.notify, s.signo, s.value, its.it_value.tv_sec, its.it_value.tv_nsec,
               its.it_interval.tv_sec, its.it_interval.tv_nsec};
    out.bytes(&t, sizeof t);
    --n;
  }
  out.u32(static_cast<uint32_t>(__atomic_load_n(&g_untracked, __ATOMIC_RELAXED)));
  return out.ok();
}

int posix_timers_restore(In& in, char* msg, size_t cap) {
  char line[160];
  uint32_t n = in.u32();
  if (!in.ok() || n > kMaxTimers || n * sizeof(Saved) > in.remaining())
    return fail(msg, cap, Msg(line, sizeof line).s("timer section: bad POSIX timer count ").u(n), EINVAL);
  for (auto& s : g_slots) s.state = kFree;  // the table is rebuilt from the section (memory held it too)
  g_untracked = 0;
  bool explicit_ids = prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0) == 0;
  int rc = 0;
  for (uint32_t k = 0; k < n && rc == 0; ++k) {
    Saved t;
    in.bytes(&t, sizeof t);
    bool sane = t.kid >= 0 && (t.notify == SIGEV_SIGNAL || t.notify == SIGEV_NONE) && t.v_sec >= 0 && t.i_sec >= 0 &&
                t.v_nsec >= 0 && t.v_nsec < 1000000000 && t.i_nsec >= 0 && t.i_nsec < 1000000000 &&
                (t.notify == SIGEV_NONE || (t.signo >= 1 && t.signo <= 64));
    if (!in.ok() || !sane) {
      rc = fail(msg, cap, Msg(line, sizeof line).s("timer section: bad POSIX timer record ").u(k), EINVAL);
      break;
    }
    rc = recreate(t, explicit_ids, msg, cap);
  }
  if (explicit_ids) prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_OFF, 0, 0, 0);
  if (rc != 0) return rc;
  uint32_t untracked = in.u32();
  if (!in.ok()) return fail(msg, cap, Msg(line, sizeof line).s("timer section: truncated"), EINVAL);
  if (untracked) {
    warn(Msg(line, sizeof line).u(untracked).s(" POSIX timer(s) with SIGEV_THREAD/SIGEV_THREAD_ID notification "
        "were not saved and do not exist after restart").c_str());
  }
  return 0;
}

}  // namespace revive::plugins

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

REVIVE_EXPORT int timer_create(clockid_t clock, struct sigevent* sev, timer_t* out) noexcept {
  auto f = revive::plugins::next_or_enosys(&revive::plugins::g_create, "timer_create");
  if (!f) return -1;
  int rc = f(clock, sev, out);
  if (rc != 0) return rc;
  // glibc encodes SIGEV_THREAD timers as negative ids (a pointer to its helper thread); those, and
  // SIGEV_THREAD_ID timers aimed at a thread id that changes across restart, are counted, not saved.
  intptr_t id = reinterpret_cast<intptr_t>(*out);
  bool simple = !sev || sev->sigev_notify == SIGEV_SIGNAL || sev->sigev_notify == SIGEV_NONE;
  if (id >= 0 && simple) {
    revive::plugins::track(static_cast<int>(id), clock, sev);
  } else {
    __atomic_add_fetch(&revive::plugins::g_untracked, 1, __ATOMIC_RELAXED);
  }
  return 0;
}

REVIVE_EXPORT int timer_delete(timer_t t) noexcept {
  auto f = revive::plugins::next_or_enosys(&revive::plugins::g_delete, "timer_delete");
  if (!f) return -1;
  int rc = f(t);
  intptr_t id = reinterpret_cast<intptr_t>(t);
  if (rc == 0 && id >= 0) revive::plugins::untrack(static_cast<int>(id));
  return rc;
}
