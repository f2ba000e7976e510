// librevive_hooks.so: the public hooks library (<revive/hooks.h>, docs/hooks.md). It finds the injected
// engine at load time through its one exported entry (hooks_abi.h) and shares one block of atomic words
// with it; without the engine every call succeeds and does nothing. Callbacks run on one thread of ours,
// started at the first registration under revive, woken by the engine with FUTEX_WAKE: never in a signal
// handler. No exception leaves this library.
#include "revive/hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hooks/hooks_abi.h"

namespace {

constexpr int kMaxCallbacks = 64;
constexpr uint32_t kDefaultTimeoutMs = 30000;

revive_hooks_shared g_sh;             // the block the engine reads and writes
const revive_hooks_engine* g_eng;     // null without revive
// Nesting depth of this thread's critical sections. Initial-exec: one %fs-relative access, no call.
__thread unsigned t_depth __attribute__((tls_model("initial-exec")));

struct Callback {
  int id;
  int kind;
  revive_hook_fn fn;
  void* arg;
};
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
Callback g_cbs[kMaxCallbacks];
int g_ncb;
int g_next_id;
bool g_thread_started;
bool g_running;  // the hooks thread is calling callbacks
pthread_t g_thread;

uint32_t load(const volatile uint32_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

void futex_wait(volatile uint32_t* w, uint32_t v) {
  syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}

void futex_wake(volatile uint32_t* w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0); }

// Leaves the count of threads inside sections; the last one out tells a waiting checkpoint.
inline void leave() {
  if (__atomic_sub_fetch(&g_sh.inside, 1, __ATOMIC_SEQ_CST) == 0 && load(&g_sh.want_wake)) g_eng->notify();
}

// Calls every callback of `kind`, in registration order, outside the lock (a callback may register or
// unregister others; unregister waits for this run to end).
void run(int kind) {
  Callback now[kMaxCallbacks];
  int n = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_ncb; ++i)
    if (g_cbs[i].kind == kind) now[n++] = g_cbs[i];
  g_running = true;
  pthread_mutex_unlock(&g_mu);
  for (int i = 0; i < n; ++i) now[i].fn(now[i].arg);
  pthread_mutex_lock(&g_mu);
  g_running = false;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

// The hooks thread: waits on the engine's requests. Checkpoint callbacks first (then tells the engine it
// may go on), restart before continue (a restored process gets only restart requests anyway).
void* hooks_thread(void*) {
  uint32_t ck = load(&g_sh.ckpt_req), rs = load(&g_sh.restart_req), co = load(&g_sh.cont_req);
  __atomic_store_n(&g_sh.thread, 1u, __ATOMIC_SEQ_CST);  // the engine asks us from now on
  futex_wake(&g_sh.thread);
  for (;;) {
    const uint32_t e = load(&g_sh.event);
    if (uint32_t v = load(&g_sh.ckpt_req); v != ck) {
      ck = v;
      run(REVIVE_HOOK_CHECKPOINT);
      __atomic_store_n(&g_sh.ckpt_done, v, __ATOMIC_SEQ_CST);
      g_eng->notify();
      continue;
    }
    if (uint32_t v = load(&g_sh.restart_req); v != rs) {
      rs = v;
      run(REVIVE_HOOK_RESTART);
      continue;
    }
    if (uint32_t v = load(&g_sh.cont_req); v != co) {
      co = v;
      run(REVIVE_HOOK_CONTINUE);
      continue;
    }
    futex_wait(&g_sh.event, e);
  }
  return nullptr;
}

// With g_mu held.
int start_thread() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);  // the program's signals stay with the program's threads
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&a, 1 << 20);
  int r = pthread_create(&g_thread, &a, hooks_thread, nullptr);
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (r != 0) return -EAGAIN;
  pthread_setname_np(g_thread, "revive-hooks");
  while (!load(&g_sh.thread)) futex_wait(&g_sh.thread, 0);  // a checkpoint right after us sees it
  g_thread_started = true;
  return 0;
}

// Fork child: only the forking thread exists. Its own sections are the only ones open; no checkpoint
// is pending here (the engine forgets the parent's); the hooks thread did not come along.
void at_fork_child() {
  pthread_mutex_init(&g_mu, nullptr);
  pthread_cond_init(&g_cv, nullptr);
  g_running = false;
  g_thread_started = false;
  g_sh.thread = 0;
  g_sh.gate = 0;
  g_sh.want_wake = 0;
  g_sh.inside = t_depth ? 1 : 0;
}

uint32_t timeout_ms_of(double s) {
  if (!(s > 0) || s > 4e6) return 0;  // also NaN
  double ms = ceil(s * 1000);
  return ms < 1 ? 1 : uint32_t(ms);
}

__attribute__((constructor)) void hooks_init() {
  g_sh.abi = REVIVE_HOOKS_ABI;
  g_sh.timeout_ms = kDefaultTimeoutMs;
  auto entry = reinterpret_cast<revive_hooks_entry_fn>(dlsym(RTLD_DEFAULT, REVIVE_HOOKS_ENTRY));
  const revive_hooks_engine* e = entry ? entry() : nullptr;
  if (e && e->abi == REVIVE_HOOKS_ABI && e->attach(&g_sh) == 0) g_eng = e;
  if (!g_eng) return;
  if (const char* v = getenv("REVIVE_CRITICAL_TIMEOUT"); v && *v) {
    char* end = nullptr;
    double s = strtod(v, &end);
    uint32_t ms = *end ? 0 : timeout_ms_of(s);
    if (ms) g_sh.timeout_ms = ms;
    else fprintf(stderr, "revive: REVIVE_CRITICAL_TIMEOUT='%s' is not a positive number of seconds; using 30\n", v);
  }
  pthread_atfork(nullptr, nullptr, at_fork_child);
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

int revive_hooks_active(void) { return g_eng != nullptr; }

int revive_register_callback(int kind, revive_hook_fn fn, void* arg) {
  if (kind < REVIVE_HOOK_CHECKPOINT || kind > REVIVE_HOOK_RESTART || !fn) return -EINVAL;
  pthread_mutex_lock(&g_mu);
  if (g_ncb == kMaxCallbacks) {
    pthread_mutex_unlock(&g_mu);
    return -ENOSPC;
  }
  if (g_eng && !g_thread_started) {
    if (int r = start_thread(); r < 0) {
      pthread_mutex_unlock(&g_mu);
      return r;
    }
  }
  const int id = ++g_next_id;
  g_cbs[g_ncb++] = Callback{id, kind, fn, arg};
  pthread_mutex_unlock(&g_mu);
  return id;
}

int revive_unregister_callback(int id) {
  pthread_mutex_lock(&g_mu);
  int r = -ENOENT;
  for (int i = 0; i < g_ncb; ++i) {
    if (g_cbs[i].id != id) continue;
    for (int j = i + 1; j < g_ncb; ++j) g_cbs[j - 1] = g_cbs[j];
    --g_ncb;
    r = 0;
    break;
  }
  const bool on_hooks_thread = g_thread_started && pthread_equal(pthread_self(), g_thread);
  while (r == 0 && g_running && !on_hooks_thread) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  return r;
}

void revive_critical_begin(void) {
  if (t_depth++ != 0 || !g_eng) return;
  for (;;) {
    __atomic_add_fetch(&g_sh.inside, 1, __ATOMIC_SEQ_CST);
    if (!load(&g_sh.gate)) return;
    // A checkpoint waits or is being taken: step out again and wait for it, so that it is taken with no
    // section open (the sections open now are allowed to end first).
    leave();
    while (load(&g_sh.gate)) futex_wait(&g_sh.gate, 1);
  }
}

int revive_critical_end(void) {
  if (t_depth == 0) return -EINVAL;
  if (--t_depth == 0 && g_eng) leave();
  return 0;
}

int revive_critical_depth(void) { return int(t_depth); }

int revive_set_critical_timeout(double seconds) {
  uint32_t ms = timeout_ms_of(seconds);
  if (!ms) return -EINVAL;
  __atomic_store_n(&g_sh.timeout_ms, ms, __ATOMIC_SEQ_CST);
  return 0;
}

double revive_critical_timeout(void) {
  uint32_t ms = load(&g_sh.timeout_ms);
  return (ms ? ms : kDefaultTimeoutMs) / 1000.0;
}

}  // extern "C"
#pragma GCC visibility pop
