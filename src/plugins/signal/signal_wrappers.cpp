// Interposed signal functions: the program can neither catch, ignore, block nor observe the engine's
// checkpoint signal. For that one signal sigaction/signal/sigset succeed but only update a virtual
// disposition (returned to the program by later calls, never installed); masks and sets handed in lose it,
// sets handed back lose it. Everything else is forwarded to libc, except that a program's handler is
// installed behind a trampoline that counts, per thread, the program's own signals: the sleep and wait
// wrappers (wait_wrappers.cpp) resume a call that failed with EINTR only when the engine's signal, and no
// signal of the program, interrupted it. The program reads its own handler and flags back.
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/signalfd.h>

#include "plugins/vpid/vpid.h"
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

// The program's own action for each signal whose kernel handler is the trampoline (handler, flags and
// mask as the program gave them). Written before the kernel's handler changes, so a signal arriving in
// between runs the new handler, as it would without revive.
struct sigaction g_user[kMaxSig + 1];
// Program signals handled by this thread (wraps). Initial-exec TLS: readable in a handler without a lock.
__thread uint32_t t_program_signals __attribute__((tls_model("initial-exec")));

bool is_function(const void* h) {
  auto v = reinterpret_cast<uintptr_t>(h);
  return v > 2 && v != uintptr_t(-1);  // not SIG_DFL, SIG_IGN, SIG_HOLD, SIG_ERR
}

// Not glibc's own signals between 31 and SIGRTMIN (SIGCANCEL, SIGSETXID): libc installs their handlers
// itself, and a program's sigaction cannot change them.
bool wrappable(int sig) {
  return sig >= 1 && sig <= kMaxSig && sig != SIGKILL && sig != SIGSTOP && !(sig > 31 && sig < SIGRTMIN) &&
         !is_ckpt(sig);
}

// The table entry of sig (zero when sig has none), copied before it changes.
struct sigaction user_of(int sig) {
  struct sigaction u;
  memset(&u, 0, sizeof u);
  if (wrappable(sig)) u = g_user[sig];
  return u;
}

bool is_trampoline(const void* h) { return h == reinterpret_cast<void*>(&revive_sig_entry); }

// A kernel action read back: the trampoline becomes the program's handler (from `user`, the table entry
// as it was when the action was installed) with the program's SA_SIGINFO.
void unwrap(struct sigaction* a, const struct sigaction& user) {
  if (!a || !is_trampoline(reinterpret_cast<void*>(a->sa_sigaction))) return;
  a->sa_sigaction = user.sa_sigaction;
  a->sa_flags = (a->sa_flags & ~SA_SIGINFO) | (user.sa_flags & SA_SIGINFO);
}

// After libc's signal()/sigset()/... installed a program handler directly: put it behind the trampoline.
// (Between the two calls a signal would reach the program's handler uncounted; its EINTR could then be
// taken for the engine's only if the engine's signal interrupted the same call too.)
void rewrap(int sig, SigactionFn real) {
  struct sigaction cur;
  if (!wrappable(sig) || real(sig, nullptr, &cur) != 0) return;
  if (!is_function(reinterpret_cast<void*>(cur.sa_handler)) || is_trampoline(reinterpret_cast<void*>(cur.sa_sigaction)))
    return;
  g_user[sig] = cur;
  cur.sa_sigaction = &revive_sig_entry;
  cur.sa_flags |= SA_SIGINFO;
  real(sig, &cur, nullptr);
}

// What libc's signal()-like call returned, as the program sees it.
sighandler_t program_handler(sighandler_t h, const struct sigaction& user) {
  return is_trampoline(reinterpret_cast<void*>(h)) ? user.sa_handler : h;
}

// signal(), sysv_signal(), bsd_signal(), sigset() for a signal other than the checkpoint signal.
sighandler_t forward_signal(int sig, sighandler_t h, SignalFn* slot, const char* name) {
  auto f = next_or_enosys(slot, name);
  if (!f) return SIG_ERR;
  const struct sigaction user = user_of(sig);
  sighandler_t prev = f(sig, h);
  if (prev == SIG_ERR) return prev;
  if (auto real = next_symbol(&g_real.sigaction, "sigaction")) rewrap(sig, real);
  return program_handler(prev, user);
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

Interruptions interruptions_now() { return {inject::checkpoint_interruptions(), t_program_signals}; }

bool engine_only(const Interruptions& before, int err) {
  if (err != EINTR) return false;
  Interruptions now = interruptions_now();
  return now.engine != before.engine && now.program == before.program;
}

void to_program_view(int sig, KSigaction* a) {
  if (!is_trampoline(a->handler) || sig < 1 || sig > kMaxSig) return;
  const struct sigaction& u = g_user[sig];
  a->handler = reinterpret_cast<void*>(u.sa_sigaction);
  a->flags = (a->flags & ~static_cast<unsigned long>(SA_SIGINFO)) | (static_cast<unsigned long>(u.sa_flags) & SA_SIGINFO);
}

void to_kernel_view(int sig, KSigaction* a) {
  if (!wrappable(sig) || !is_function(a->handler) || is_trampoline(a->handler)) return;
  struct sigaction& u = g_user[sig];
  memset(&u, 0, sizeof u);
  u.sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(a->handler);
  u.sa_flags = static_cast<int>(a->flags);
  memcpy(&u.sa_mask, &a->mask, sizeof a->mask);
  a->handler = reinterpret_cast<void*>(&revive_sig_entry);
  a->flags |= SA_SIGINFO;
}

int signal_wrappers_init() {
  wait_wrappers_init();
  io_wrappers_init();
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

// The trampoline's body: the kernel enters revive_sig_entry (signal_entry.cpp), which reads the
// virtual-pid epoch in its first instruction and comes here with it as `ep`: the epoch the kernel wrote
// `info` in, even when a checkpoint and a restart came between the delivery and this code (the signal
// delivered together with the checkpoint signal: the engine's handler then runs first, with the thread at
// the entry's first instruction).
extern "C" __attribute__((visibility("hidden"))) void revive_sig_body(int sig, siginfo_t* info, void* uc,
                                                                     uint32_t ep) {
  using namespace revive::plugins;
  t_program_signals = t_program_signals + 1;
  if (sig < 1 || sig > kMaxSig) return;
  const struct sigaction& a = g_user[sig];
  // The engine learns whether this handler interrupted a call that is made again when it returns
  // (vpid::answered_in: whose ids that call's answer holds, if a checkpoint cuts the handler).
  revive::inject::program_handler_enter(uc);
  if (a.sa_flags & SA_SIGINFO) {
    revive::vpid::virtual_siginfo_since(info, ep);  // the sender as the program knows it (virtual pids)
    if (is_function(reinterpret_cast<void*>(a.sa_sigaction))) a.sa_sigaction(sig, info, uc);
  } else if (is_function(reinterpret_cast<void*>(a.sa_handler))) {
    a.sa_handler(sig);
  }
  revive::inject::program_handler_leave();
}

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
// A program handler is installed behind the trampoline (the table entry first, see g_user).
REVIVE_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  using namespace revive::plugins;
  if (is_ckpt(sig)) return virtual_sigaction(act, old);
  auto f = next_or_enosys(&g_real.sigaction, "sigaction");
  if (!f) return -1;
  const bool table = wrappable(sig);
  const struct sigaction user = user_of(sig);
  struct sigaction copy;
  bool wrapped = false;
  if (act) {
    copy = *act;
    hide(&copy.sa_mask);
    if (table && is_function(reinterpret_cast<void*>(copy.sa_handler))) {
      g_user[sig] = copy;
      copy.sa_sigaction = &revive_sig_entry;
      copy.sa_flags |= SA_SIGINFO;
      wrapped = true;
    }
  }
  int rc = f(sig, act ? &copy : nullptr, old);
  if (rc != 0 && wrapped) g_user[sig] = user;
  if (rc == 0 && old) {
    hide(&old->sa_mask);
    unwrap(old, user);
  }
  return rc;
}

REVIVE_EXPORT sighandler_t signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h);
  return revive::plugins::forward_signal(sig, h, &g_real.signal, "signal");
}

REVIVE_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h, SA_RESETHAND | SA_NODEFER);
  return revive::plugins::forward_signal(sig, h, &g_sysv_signal, "sysv_signal");
}

// What signal() is under strict ISO C (-std=c99 without _DEFAULT_SOURCE): glibc's headers redirect to it.
REVIVE_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h) noexcept { return sysv_signal(sig, h); }

REVIVE_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h) noexcept {
  if (is_ckpt(sig)) return revive::plugins::virtual_signal(h);
  return revive::plugins::forward_signal(sig, h, &g_bsd_signal, "bsd_signal");
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
  return revive::plugins::forward_signal(sig, h, &g_real.sigset, "sigset");
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

// The checkpoint signal stays deliverable while suspended; sigsuspend returns when a handler of the
// program ran, not when only the engine's did (it is suspended again).
REVIVE_EXPORT int sigsuspend(const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigsuspend, "sigsuspend");
  const sigset_t* m = strip(mask, &copy);
  return f ? revive::plugins::resume_ms(-1, [&](int) { return f(m); }) : -1;
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
  const sigset_t* s = strip(set, &copy);
  uint32_t ep = 0;  // of the attempt that returned (vpid.h, to_virt_since)
  int r = f ? revive::plugins::resume_ms(-1, [&](int) { ep = revive::vpid::epoch(); return f(s, info); }) : -1;
  if (r > 0) revive::vpid::virtual_siginfo_since(info, ep);
  return r;
}

REVIVE_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  sigset_t copy;
  auto f = next_or_enosys(&g_real.sigtimedwait, "sigtimedwait");
  const sigset_t* s = strip(set, &copy);
  uint32_t ep = 0;  // of the attempt that returned (vpid.h, to_virt_since)
  int r = f ? revive::plugins::resume_ts(timeout, [&](const struct timespec* t) {
    ep = revive::vpid::epoch();
    return f(s, info, t);
  }) : -1;
  if (r > 0) revive::vpid::virtual_siginfo_since(info, ep);
  return r;
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
  int r = f ? f(fd, strip(mask, &copy), flags) : -1;
  if (r >= 0) revive::plugins::signalfd_made(r);
  return r;
}
