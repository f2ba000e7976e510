// Sleeps and waits that the engine's checkpoint signal must not cut short. A handler running on a thread
// makes the kernel end nanosleep/clock_nanosleep (ERESTART_RESTARTBLOCK) and poll/select/epoll_wait
// (ERESTARTNOHAND) with EINTR, SA_RESTART or not: without these wrappers every checkpoint would wake every
// sleeping thread early. Each wrapper calls libc's function and, when it fails with EINTR and only the
// engine's signal interrupted it (signal_wrappers.h: engine_only), calls it again for the time left; an
// interruption by any handler of the program returns EINTR as without revive. Time left: a CLOCK_MONOTONIC
// deadline taken before the first call (only for a positive timeout: a zero or infinite one needs none),
// except select (the kernel writes the time left into its timeout) and a relative sleep on a CPU-time
// clock (the kernel's remainder).
// A call interrupted by a checkpoint and restored from its image resumes the same way (the count is
// bumped before the thread's context is saved).
//
// The waits that install a signal mask for their duration (ppoll, pselect, epoll_pwait, epoll_pwait2)
// also lose the checkpoint signal from the mask: a program passing a full mask would otherwise hold off
// checkpoints for as long as it waits.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/next_symbol.h"
#include "plugins/signal/ckpt_mask.h"
#include "plugins/signal/signal_wrappers.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

using PpollFn = int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
using PselectFn = int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
using EpollPwaitFn = int (*)(int, struct epoll_event*, int, int, const sigset_t*);
using EpollPwait2Fn = int (*)(int, struct epoll_event*, int, const struct timespec*, const sigset_t*);

PpollFn g_ppoll;
PselectFn g_pselect;
EpollPwaitFn g_epoll_pwait;
EpollPwait2Fn g_epoll_pwait2;

using NanosleepFn = int (*)(const struct timespec*, struct timespec*);
using ClockNanosleepFn = int (*)(clockid_t, int, const struct timespec*, struct timespec*);
using PollFn = int (*)(struct pollfd*, nfds_t, int);
using SelectFn = int (*)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
using EpollWaitFn = int (*)(int, struct epoll_event*, int, int);

NanosleepFn g_nanosleep;
ClockNanosleepFn g_clock_nanosleep;
PollFn g_poll;
SelectFn g_select;
EpollWaitFn g_epoll_wait;

int64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

Deadline deadline_in(int64_t ns) {
  if (ns < 0) return {true, 0, 0};
  return {false, mono_ns() + ns, ns};
}

int64_t left_ns(const Deadline& d) {
  int64_t l = d.end_ns - mono_ns();
  return l < 0 ? 0 : l > d.total_ns ? d.total_ns : l;
}

int left_ms(const Deadline& d) {
  if (d.forever) return -1;
  return int((left_ns(d) + 999999) / 1000000);
}

// nanosleep with the engine's interruptions resumed until the deadline the first call set (so a sleep in
// the original process ends when it would have without revive; a restored one ends at once if its time
// passed while it was down). On the program's EINTR the kernel's remainder is the whole call's.
int resumable_nanosleep(const struct timespec* req, struct timespec* rem) {
  auto f = next_or_enosys(&g_nanosleep, "nanosleep");
  return f ? resume_ts(req, [&](const struct timespec* t) { return f(t, rem); }) : -1;
}

void wait_wrappers_init() {
  next_symbol(&g_ppoll, "ppoll");
  next_symbol(&g_pselect, "pselect");
  next_symbol(&g_epoll_pwait, "epoll_pwait");
  next_symbol(&g_epoll_pwait2, "epoll_pwait2");
  next_symbol(&g_nanosleep, "nanosleep");
  next_symbol(&g_clock_nanosleep, "clock_nanosleep");
  next_symbol(&g_poll, "poll");
  next_symbol(&g_select, "select");
  next_symbol(&g_epoll_wait, "epoll_wait");
}

}  // namespace revive::plugins

using revive::plugins::engine_only;
using revive::plugins::Interruptions;
using revive::plugins::interruptions_now;
using revive::plugins::next_or_enosys;
using revive::plugins::strip;

REVIVE_EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
  return revive::plugins::resumable_nanosleep(req, rem);
}

// Returns the error number and leaves errno alone, like libc's. Relative sleeps on the clocks that run
// at CLOCK_MONOTONIC's pace use its deadline; an absolute sleep is simply called again; a relative sleep
// on a CPU-time clock goes on for the remainder the kernel reports.
REVIVE_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec* req, struct timespec* rem) {
  auto f = next_or_enosys(&revive::plugins::g_clock_nanosleep, "clock_nanosleep");
  if (!f) return ENOSYS;
  const int saved = errno;
  auto call = [&](const struct timespec* t) {
    int e = f(clk, flags, t, rem);
    errno = e;
    return e ? -1 : 0;
  };
  int e;
  if (flags & TIMER_ABSTIME) {
    e = revive::plugins::resume_ms(-1, [&](int) { return call(req); }) ? errno : 0;
  } else if (clk == CLOCK_MONOTONIC || clk == CLOCK_REALTIME || clk == CLOCK_BOOTTIME) {
    e = revive::plugins::resume_ts(req, call) ? errno : 0;
  } else {
    struct timespec mine, left;
    struct timespec* out = rem ? rem : &mine;
    const struct timespec* cur = req;
    for (;;) {
      const Interruptions before = interruptions_now();
      e = f(clk, flags, cur, out);
      if (e == 0 || !engine_only(before, e)) break;
      left = *out;
      cur = &left;
    }
  }
  errno = saved;
  return e;
}

// glibc's sleep and usleep call nanosleep inside libc, out of an interposer's reach: both are redone
// here over the resumable nanosleep, with glibc's results (sleep: whole seconds not slept).
REVIVE_EXPORT unsigned int sleep(unsigned int seconds) {
  struct timespec ts = {time_t(seconds), 0}, rem = {0, 0};
  const int saved = errno;
  if (revive::plugins::resumable_nanosleep(&ts, &rem) < 0) return unsigned(rem.tv_sec);
  errno = saved;
  return 0;
}

REVIVE_EXPORT int usleep(useconds_t usec) {
  struct timespec ts = {time_t(usec / 1000000), long(usec % 1000000) * 1000};
  return revive::plugins::resumable_nanosleep(&ts, nullptr);
}

REVIVE_EXPORT int poll(struct pollfd* fds, nfds_t n, int timeout) {
  auto f = next_or_enosys(&revive::plugins::g_poll, "poll");
  return f ? revive::plugins::resume_ms(timeout, [&](int t) { return f(fds, n, t); }) : -1;
}

// Linux's select leaves the sets untouched on EINTR and writes the time left into *timeout (glibc passes
// that on), so calling it again with the same arguments resumes it.
REVIVE_EXPORT int select(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* timeout) {
  auto f = next_or_enosys(&revive::plugins::g_select, "select");
  return f ? revive::plugins::resume_ms(0, [&](int) { return f(n, r, w, e, timeout); }) : -1;
}

REVIVE_EXPORT int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
  auto f = next_or_enosys(&revive::plugins::g_epoll_wait, "epoll_wait");
  return f ? revive::plugins::resume_ms(timeout, [&](int t) { return f(epfd, ev, max, t); }) : -1;
}

REVIVE_EXPORT int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* timeout, const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_ppoll, "ppoll");
  const sigset_t* m = strip(mask, &copy);
  return f ? revive::plugins::resume_ts(timeout, [&](const struct timespec* t) { return f(fds, n, t, m); }) : -1;
}

REVIVE_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* timeout,
                          const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_pselect, "pselect");
  const sigset_t* m = strip(mask, &copy);
  return f ? revive::plugins::resume_ts(timeout, [&](const struct timespec* t) { return f(n, r, w, e, t, m); }) : -1;
}

REVIVE_EXPORT int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_epoll_pwait, "epoll_pwait");
  const sigset_t* m = strip(mask, &copy);
  return f ? revive::plugins::resume_ms(timeout, [&](int t) { return f(epfd, ev, max, t, m); }) : -1;
}

REVIVE_EXPORT int epoll_pwait2(int epfd, struct epoll_event* ev, int max, const struct timespec* timeout,
                               const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_epoll_pwait2, "epoll_pwait2");
  const sigset_t* m = strip(mask, &copy);
  return f ? revive::plugins::resume_ts(timeout, [&](const struct timespec* t) { return f(epfd, ev, max, t, m); }) : -1;
}
