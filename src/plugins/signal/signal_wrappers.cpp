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

bool is_ckpt(int sig) { return sig != 0 && sig == ckpt_sig(); }

// Copy of a set without the checkpoint signal (nullptr stays nullptr).
const sigset_t* strip(const sigset_t* in, sigset_t* copy) {
  if (!in) return nullptr;
  *copy = *in;
  if (int s = ckpt_sig()) sigdelset(copy, s);
  return copy;
}
void hide(sigset_t* out) {
  if (!out) return;
  if (int s = ckpt_sig()) sigdelset(out, s);
}

int virtual_sigaction(const struct sigaction* act, struct sigaction* old) {
  struct sigaction prev = g_virtual;
  if (act) g_virtual = *act;
  if (old) *old = prev;
  return 0;
}

// signal()/sigset() for the checkpoint signal: BSD semantics (SA_RESTART), virtual only.
sighandler_t virtual_signal(sighandler_t h) {
  sighandler_t prev = g_virtual.sa_handler;  // shares storage with sa_sigaction
  memset(&g_virtual, 0, sizeof g_virtual);
  g_virtual.sa_handler = h;
  g_virtual.sa_flags = SA_RESTART;
  return prev;
}

template <typename Fn>
Fn real(Fn* slot, const char* name) {
  Fn f = next_symbol(slot, name);
  if (!f) errno = ENOSYS;
  return f;
}

}  // namespace

int signal_wrappers_init() {
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
  auto f = plugins::real(&plugins::g_real.sigaction, "sigaction");
  return f ? f(sig, act, old) : -1;
}
}  // namespace revive::inject

using revive::plugins::g_real;
using revive::plugins::hide;
using revive::plugins::is_ckpt;
using revive::plugins::real;
using revive::plugins::strip;

REVIVE_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_sigaction(act, old);
  auto f = real(&g_real.sigaction, "sigaction");
  return f ? f(sig, act, old) : -1;
}

REVIVE_EXPORT sighandler_t signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h);
  auto f = real(&g_real.signal, "signal");
  return f ? f(sig, h) : SIG_ERR;
}

REVIVE_EXPORT sighandler_t sigset(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) {
    // SIG_HOLD would block it: refused silently like any block of the checkpoint signal.
    if (h == SIG_HOLD) return revive::plugins::g_virtual.sa_handler;
    return revive::plugins::virtual_signal(h);
  }
  auto f = real(&g_real.sigset, "sigset");
  return f ? f(sig, h) : SIG_ERR;
}

REVIVE_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  sigset_t copy;
  auto f = real(&g_real.sigprocmask, "sigprocmask");
  int rc = f ? f(how, strip(set, &copy), old) : -1;
  if (rc == 0) hide(old);
  return rc;
}

REVIVE_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  sigset_t copy;
  auto f = real(&g_real.pthread_sigmask, "pthread_sigmask");
  int rc = f ? f(how, strip(set, &copy), old) : ENOSYS;
  if (rc == 0) hide(old);
  return rc;
}

// The checkpoint signal stays deliverable while suspended. Known limit: a checkpoint taken during
// sigsuspend makes it return -1/EINTR, as any caught signal would (docs/plugins.md).
REVIVE_EXPORT int sigsuspend(const sigset_t* mask) {
  sigset_t copy;
  auto f = real(&g_real.sigsuspend, "sigsuspend");
  return f ? f(strip(mask, &copy)) : -1;
}

// Waiting for the checkpoint signal would steal it from the engine: it is removed from the wait set.
REVIVE_EXPORT int sigwait(const sigset_t* set, int* sig) {
  sigset_t copy;
  auto f = real(&g_real.sigwait, "sigwait");
  return f ? f(strip(set, &copy), sig) : ENOSYS;
}

REVIVE_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  sigset_t copy;
  auto f = real(&g_real.sigwaitinfo, "sigwaitinfo");
  return f ? f(strip(set, &copy), info) : -1;
}

REVIVE_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  sigset_t copy;
  auto f = real(&g_real.sigtimedwait, "sigtimedwait");
  return f ? f(strip(set, &copy), info, timeout) : -1;
}

REVIVE_EXPORT int sigpending(sigset_t* set) noexcept {
  auto f = real(&g_real.sigpending, "sigpending");
  int rc = f ? f(set) : -1;
  if (rc == 0) hide(set);
  return rc;
}

REVIVE_EXPORT int signalfd(int fd, const sigset_t* mask, int flags) noexcept {
  sigset_t copy;
  auto f = real(&g_real.signalfd, "signalfd");
  return f ? f(fd, strip(mask, &copy), flags) : -1;
}
