#pragma once

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "plugins/signal/ksig.h"
#include "plugins/vpid/vpid.h"

// The kernel handler of every program handler the plugin wraps (signal_entry.cpp): reads the virtual-pid
// epoch, then runs the program's handler through revive_sig_body (signal_wrappers.cpp).
extern "C" __attribute__((visibility("hidden"))) void revive_sig_entry(int sig, siginfo_t* info, void* uc);

namespace revive::plugins {

// Given to the engine (inject::set_cut_fixup) at init: a thread the checkpoint signal finds at
// revive_sig_entry's first instruction is moved past it with what it would have read (signal_entry.cpp).
void signal_entry_cut_fixup(void* uctx);

// Resolves every real function the signal wrappers forward to (called from the plugin's init()).
int signal_wrappers_init();
// Same for the sleeps and waits (wait_wrappers.cpp), and the socket I/O (io_wrappers.cpp).
void wait_wrappers_init();
void io_wrappers_init();

// Signalfd descriptors (plugins/common/sigfd_set.h), so that read() and readv() give their senders' ids as
// the program knows them (virtual pids), also through dups and for one inherited across exec.
void signalfd_made(int fd);
// After read() on fd returned n > 0 bytes into buf (readv: into the iovecs): virtual senders if fd is a
// signalfd.
// `c`: taken as the read that returned began (vpid.h, answered_in: whose kernel ids the records hold).
void signalfd_read(int fd, void* buf, long n, vpid::CallStart c);
void signalfd_readv(int fd, const struct iovec* iov, int cnt, long n, vpid::CallStart c);

// The calling thread's counts of interruptions by the engine's signals and of its own handled signals.
struct Interruptions {
  uint32_t engine, program;
};
Interruptions interruptions_now();
// After a call failed with error `err`: true when it is EINTR and since `before` only the engine's signals
// (no handler of the program) ran on this thread, so the call is to be resumed as if nothing had happened.
bool engine_only(const Interruptions& before, int err);

// A relative timeout's end on CLOCK_MONOTONIC, for waits whose remaining time the kernel does not report.
struct Deadline {
  bool forever;
  int64_t end_ns, total_ns;
};
Deadline deadline_in(int64_t ns);  // ns < 0: forever
// Time left, clamped to [0, total] (after a restart on another host the clock may be anywhere).
int64_t left_ns(const Deadline& d);
int left_ms(const Deadline& d);  // rounded up, like the kernel's poll timeouts

// Runs call(timeout) (a wait returning -1/errno) until it succeeds or fails for another reason than an
// interruption by the engine alone; each new try gets the time left of a timeout in milliseconds
// (negative: infinite, zero: none). errno is left as found when a resumed wait succeeds.
template <typename Call>
int resume_ms(int timeout, Call call) {
  const int saved = errno;
  Deadline d{timeout < 0, 0, 0};
  if (timeout > 0) d = deadline_in(int64_t(timeout) * 1000000);
  for (bool again = false;; again = true) {
    const Interruptions before = interruptions_now();
    int rc = call(again && timeout > 0 ? left_ms(d) : timeout);
    if (rc >= 0 || !engine_only(before, errno)) {
      if (rc >= 0 && again) errno = saved;
      return rc;
    }
  }
}

// The same for a timespec timeout (nullptr: infinite), which the wait must not modify.
template <typename Call>
int resume_ts(const struct timespec* timeout, Call call) {
  const int saved = errno;
  Deadline d{true, 0, 0};
  if (timeout && timeout->tv_sec >= 0 && timeout->tv_nsec >= 0 && timeout->tv_nsec < 1000000000)
    d = deadline_in(int64_t(timeout->tv_sec) * 1000000000 + timeout->tv_nsec);
  for (bool again = false;; again = true) {
    const Interruptions before = interruptions_now();
    struct timespec left;
    const struct timespec* t = timeout;
    if (again && timeout && !d.forever) {
      int64_t ns = left_ns(d);
      left = {time_t(ns / 1000000000), long(ns % 1000000000)};
      t = &left;
    }
    int rc = call(t);
    if (rc >= 0 || !engine_only(before, errno)) {
      if (rc >= 0 && again) errno = saved;
      return rc;
    }
  }
}

// Dispositions as saved in the image are the program's (its handler, not the trampoline); restore puts
// them back behind the trampoline. Both act on a raw rt_sigaction record of signal `sig`.
void to_program_view(int sig, KSigaction* a);
void to_kernel_view(int sig, KSigaction* a);

}  // namespace revive::plugins
