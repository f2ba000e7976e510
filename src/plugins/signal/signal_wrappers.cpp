// Interposed signal functions: the program can neither catch, ignore, block nor observe the engine's
// checkpoint signal. For that one signal sigaction/signal/sigset succeed but only update a virtual
// disposition (returned to the program by later calls, never installed); masks and sets handed in lose it,
// sets handed back lose it. Everything else is forwarded unchanged to libc.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>

#include "plugins/common/next_symbol.h"
#include "plugins/plugins.h"
#include "plugins/signal/ckpt_mask.h"
#include "plugins/signal/ksig.h"
#include "plugins/signal/signal_wrappers.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFn = sighandler_t (*)(int, sighandler_t);
using MaskFn = int (*)(int, const sigset_t*, sigset_t*);
using SuspendFn = int (*)(const sigset_t*);
using SigwaitFn = int (*)(const sigset_t*, int*);
using WaitinfoFn = int (*)(const sigset_t*, siginfo_t*);
using TimedwaitFn = int (*)(const sigset_t*, siginfo_t*, const struct timespec*);
using PendingFn = int (*)(sigset_t*);
using SignalfdFn = int (*)(int, const sigset_t*, int);

struct Real {
  SigactionFn sigaction;
  SignalFn signal;
  SignalFn sigset;
  MaskFn sigprocmask;
  MaskFn pthread_sigmask;
  SuspendFn sigsuspend;
  SigwaitFn sigwait;
  WaitinfoFn sigwaitinfo;
  TimedwaitFn sigtimedwait;
  PendingFn sigpending;
  SignalfdFn signalfd;
};
Real g_real;  // zero-initialised: no constructor runs (contracts: no static objects with constructors)

// The program's view of the checkpoint signal's disposition. Starts as SIG_DFL (all zero).
struct sigaction g_virtual;

int virtual_sigaction(const struct sigaction* act, struct sigaction* old) {
  struct sigaction prev = g_virtual;
  if (act) g_virtual = *act;
  if (old) *old = prev;
  return 0;
}

// signal()/sigset() for the checkpoint signal, virtual only: BSD semantics (SA_RESTART), or System V's
// (one-shot, not blocked in its handler) for sysv_signal.
sighandler_t virtual_signal(sighandler_t h, int flags = SA_RESTART) {
  sighandler_t prev = g_virtual.sa_handler;  // shares storage with sa_sigaction
  memset(&g_virtual, 0, sizeof g_virtual);
  g_virtual.sa_handler = h;
  g_virtual.sa_flags = flags;
  return prev;
}

SignalFn g_sysv_signal, g_bsd_signal;
using SigFn = int (*)(int);
SigFn g_sighold, g_sigrelse, g_sigignore;

// The obsolete XSI calls: for the checkpoint signal hold/release do nothing, ignore is virtual.
int xsi(int sig, SigFn* slot, const char* name, bool ignore) {
  if (is_ckpt(sig)) {
    if (ignore) virtual_signal(SIG_IGN);
    return 0;
  }
  auto f = next_or_enosys(slot, name);
  return f ? f(sig) : -1;
}

}  // namespace

int signal_wrappers_init() {
  wait_wrappers_init();
  next_symbol(&g_real.sigaction, "sigaction");
  next_symbol(&g_real.signal, "signal");
  next_symbol(&g_real.sigset, "sigset");
  next_symbol(&g_real.sigprocmask, "sigprocmask");
  next_symbol(&g_real.pthread_sigmask, "pthread_sigmask");
  next_symbol(&g_real.sigsuspend, "sigsuspend");
  next_symbol(&g_real.sigwait, "sigwait");
  next_symbol(&g_real.sigwaitinfo, "sigwaitinfo");
  next_symbol(&g_real.sigtimedwait, "sigtimedwait");
  next_symbol(&g_real.sigpending, "sigpending");
  next_symbol(&g_real.signalfd, "signalfd");
  return g_real.sigaction && g_real.sigprocmask ? 0 : -ENOSYS;
}

}  // namespace revive::plugins

namespace revive::inject {
int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  auto f = plugins::next_or_enosys(&plugins::g_real.sigaction, "sigaction");
  return f ? f(sig, act, old) : -1;
}
}  // namespace revive::inject

using revive::plugins::g_real;
using revive::plugins::g_bsd_signal;
using revive::plugins::g_sysv_signal;
using revive::plugins::hide;
using revive::plugins::is_ckpt;
using revive::plugins::next_or_enosys;
using revive::plugins::strip;

// Other signals: installed for real, but a handler's sa_mask (often a full set) may not block the
// checkpoint signal while the handler runs either; it is hidden from the mask read back.
REVIVE_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_sigaction(act, old);
  auto f = next_or_enosys(&g_real.sigaction, "sigaction");
  if (!f) return -1;
  struct sigaction copy;
  if (act) {
    copy = *act;
    revive::plugins::hide(&copy.sa_mask);
  }
  int rc = f(sig, act ? &copy : nullptr, old);
  if (rc == 0 && old) revive::plugins::hide(&old->sa_mask);
  return rc;
}

REVIVE_EXPORT sighandler_t signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h);
  auto f = next_or_enosys(&g_real.signal, "signal");
  return f ? f(sig, h) : SIG_ERR;
}

REVIVE_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h, SA_RESETHAND | SA_NODEFER);
  auto f = next_or_enosys(&g_sysv_signal, "sysv_signal");
  return f ? f(sig, h) : SIG_ERR;
}

// What signal() is under strict ISO C (-std=c99 without _DEFAULT_SOURCE): glibc's headers redirect to it.
REVIVE_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h) noexcept { return sysv_signal(sig, h); }

REVIVE_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h);
  auto f = next_or_enosys(&g_bsd_signal, "bsd_signal");
  return f ? f(sig, h) : SIG_ERR;
}

REVIVE_EXPORT int sighold(int sig) noexcept {
  return revive::plugins::xsi(sig, &revive::plugins::g_sighold, "sighold", false);
}
REVIVE_EXPORT int sigrelse(int sig) noexcept {
  return revive::plugins::xsi(sig, &revive::plugins::g_sigrelse, "sigrelse", false);
}
REVIVE_EXPORT int sigignore(int sig) noexcept {
  return revive::plugins::xsi(sig, &revive::plugins::g_sigignore, "sigignore", true);
}

REVIVE_EXPORT sighandler_t sigset(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) {
    // SIG_HOLD would block it: refused silently like any block of the checkpoint signal.
    if (h == SIG_HOLD) return revive::plugins::g_virtual.sa_handler;
    return revive::plugins::virtual_signal(h);
  }
  auto f = next_or_enosys(&g_real.sigset, "sigset");
  return f ? f(sig, h) : SIG_ERR;
}

REVIVE_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigprocmask, "sigprocmask");
  int rc = f ? f(how, strip(set, &copy), old) : -1;
  if (rc == 0) hide(old);
  return rc;
}

REVIVE_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.pthread_sigmask, "pthread_sigmask");
  int rc = f ? f(how, strip(set, &copy), old) : ENOSYS;
  if (rc == 0) hide(old);
  return rc;
}

// The checkpoint signal stays deliverable while suspended. Known limit: a checkpoint taken during
// sigsuspend makes it return -1/EINTR, as any caught signal would (docs/plugins.md).
REVIVE_EXPORT int sigsuspend(const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigsuspend, "sigsuspend");
  return f ? f(strip(mask, &copy)) : -1;
}

// Waiting for the checkpoint signal would steal it from the engine: it is removed from the wait set.
REVIVE_EXPORT int sigwait(const sigset_t* set, int* sig) {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigwait, "sigwait");
  return f ? f(strip(set, &copy), sig) : ENOSYS;
}

REVIVE_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigwaitinfo, "sigwaitinfo");
  return f ? f(strip(set, &copy), info) : -1;
}

REVIVE_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigtimedwait, "sigtimedwait");
  return f ? f(strip(set, &copy), info, timeout) : -1;
}

REVIVE_EXPORT int sigpending(sigset_t* set) noexcept {
  auto f = next_or_enosys(&g_real.sigpending, "sigpending");
  int rc = f ? f(set) : -1;
  if (rc == 0) hide(set);
  return rc;
}

REVIVE_EXPORT int signalfd(int fd, const sigset_t* mask, int flags) noexcept {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.signalfd, "signalfd");
  return f ? f(fd, strip(mask, &copy), flags) : -1;
}
