// The fork wrappers' slots (proctree.h): forks in flight and fork children that have not joined the
// coordinator yet (lazy join, docs/process-trees.md). A slot holds the parent's end of the socketpair on
// which the child writes its joined byte ('1' in, '0' joined outside a checkpoint in progress, EOF: it
// ended before it joined). Static tables, raw system calls: the checkpoint reads them with every other
// thread parked, from the checkpoint signal's handler.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/common/next_symbol.h"
#include "plugins/proctree/proctree.h"

namespace revive::proctree {

volatile uint32_t g_forks_in_flight;

namespace {

volatile int g_inflight_fd[kMaxInFlight];  // 0: free; else the sync fd + 1
volatile int g_pending_pid[kMaxInFlight];  // > 0: fork() returned, the child joins lazily; 0: in flight
volatile uint32_t g_busy[kMaxInFlight];    // 1 while someone reads the slot's socket (settle)
volatile uint32_t g_pending_count;
// The answer of the last checkpoint's settle (children_join_now), read by the drain phase.
bool g_children_ok = true;

// How long a checkpoint (or an exiting/exec'ing parent) waits for its poked children: long enough for a
// loaded machine's connect + HELLO, short of any phase timeout.
constexpr int kJoinWaitMs = 2000;

long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return syscall(n, a, b, c, d, e, f);
}

uint64_t mono_ms() {
  struct timespec ts;
  raw(SYS_clock_gettime, CLOCK_MONOTONIC, long(&ts));
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

bool claim(int i) {
  uint32_t idle = 0;
  return __atomic_compare_exchange_n(&g_busy[i], &idle, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void unclaim(int i) { __atomic_store_n(&g_busy[i], 0u, __ATOMIC_RELEASE); }

// A claimed pending slot whose child has answered (or ended): close our end, free the slot.
void release_pending(int i) {
  const int fd = __atomic_load_n(&g_inflight_fd[i], __ATOMIC_ACQUIRE) - 1;
  __atomic_store_n(&g_pending_pid[i], 0, __ATOMIC_RELEASE);
  __atomic_sub_fetch(&g_pending_count, 1, __ATOMIC_ACQ_REL);
  if (fd >= 0) raw(SYS_close, fd);
  __atomic_store_n(&g_inflight_fd[i], 0, __ATOMIC_RELEASE);
  unclaim(i);
}

using ExitFn = void (*)(int);
ExitFn g_real_exit, g_real_Exit;

}  // namespace

int inflight_begin(int sync_fd) {
  __atomic_add_fetch(&g_forks_in_flight, 1, __ATOMIC_ACQ_REL);
  if (sync_fd < 0) return -1;
  for (int i = 0; i < kMaxInFlight; ++i) {
    int free = 0;
    if (__atomic_compare_exchange_n(&g_inflight_fd[i], &free, sync_fd + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return i;
  }
  return -1;
}

void inflight_end(int slot) {
  if (slot >= 0) __atomic_store_n(&g_inflight_fd[slot], 0, __ATOMIC_RELEASE);
  __atomic_sub_fetch(&g_forks_in_flight, 1, __ATOMIC_ACQ_REL);
}

void inflight_pending(int slot, pid_t pid) {
  // pid first: from here the slot is the pending child's, not a fork in flight (a checkpoint that looks
  // in between counts one fork in flight without its byte and refuses, which is safe).
  __atomic_store_n(&g_pending_pid[slot], int(pid), __ATOMIC_RELEASE);
  __atomic_add_fetch(&g_pending_count, 1, __ATOMIC_ACQ_REL);
  __atomic_sub_fetch(&g_forks_in_flight, 1, __ATOMIC_ACQ_REL);
}

void inflight_reset_in_child() {
  for (int i = 0; i < kMaxInFlight; ++i) {
    g_inflight_fd[i] = 0;
    g_pending_pid[i] = 0;
    g_busy[i] = 0;
  }
  g_pending_count = 0;
}

// Runs in the checkpoint (every other thread parked): counts in-flight slots whose '1' waits unread.
bool inflight_all_joined() {
  uint32_t n = __atomic_load_n(&g_forks_in_flight, __ATOMIC_ACQUIRE), in = 0;
  if (n == 0) return true;
  for (int i = 0; i < kMaxInFlight; ++i) {
    int v = __atomic_load_n(&g_inflight_fd[i], __ATOMIC_ACQUIRE);
    if (v == 0 || __atomic_load_n(&g_pending_pid[i], __ATOMIC_ACQUIRE) != 0) continue;
    char c = 0;
    if (raw(SYS_recvfrom, v - 1, long(&c), 1, MSG_PEEK | MSG_DONTWAIT, 0, 0) == 1 && c == '1') ++in;
  }
  return in >= n;
}

bool pending_children() { return __atomic_load_n(&g_pending_count, __ATOMIC_ACQUIRE) != 0; }

bool settle_pending(int timeout_ms, bool poke) {
  if (!pending_children()) return true;
  bool poked[kMaxInFlight] = {};
  bool ok = true;
  const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
  for (;;) {
    struct pollfd wait[kMaxInFlight];
    int nwait = 0;
    for (int i = 0; i < kMaxInFlight; ++i) {
      if (__atomic_load_n(&g_pending_pid[i], __ATOMIC_ACQUIRE) <= 0) continue;
      if (!claim(i)) {  // another thread of ours reads it (parked in the middle, at a checkpoint)
        ok = false;
        continue;
      }
      const int pid = __atomic_load_n(&g_pending_pid[i], __ATOMIC_ACQUIRE);
      const int fd = __atomic_load_n(&g_inflight_fd[i], __ATOMIC_ACQUIRE) - 1;
      if (pid <= 0 || fd < 0) {  // settled meanwhile
        unclaim(i);
        continue;
      }
      char c = 0;
      long r = raw(SYS_recvfrom, fd, long(&c), 1, MSG_DONTWAIT, 0, 0);
      if (r == 1 || r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        // '0': it joined outside a checkpoint in progress (it is a member from now on, but not of that
        // generation). EOF: it ended (or exec'ed a program outside the computation) before joining; as
        // a zombie it is in our image (collect_zombies), reaped it is gone.
        if (r == 1 && c != '1') ok = false;
        release_pending(i);
        continue;
      }
      // Still holds its end, so it is alive and unreaped (its pid is its own): wake it once. A child
      // that blocks the signal stays unjoined until it unblocks it; the wait below is bounded.
      if (poke && !poked[i]) raw(SYS_kill, pid, inject::checkpoint_signal());
      poked[i] = true;
      wait[nwait++] = {fd, POLLIN, 0};
      unclaim(i);
    }
    const uint64_t now = mono_ms();
    if (nwait == 0) return ok;
    if (timeout_ms == 0 || now >= deadline) return false;
    raw(SYS_poll, long(wait), nwait, long(deadline - now));
  }
}

void children_join_now() { g_children_ok = settle_pending(kJoinWaitMs, true); }

bool children_joined_at_suspend() {
  const bool ok = g_children_ok;
  g_children_ok = true;
  return ok;
}

void join_children_before_leaving() { settle_pending(kJoinWaitMs, true); }

namespace {
void at_exit(int, void*) { join_children_before_leaving(); }
}  // namespace

void pending_init() {
  // Now, not in a child's _exit (dlsym there would cost every short-lived child its lookups).
  plugins::next_symbol(&g_real_exit, "_exit");
  plugins::next_symbol(&g_real_Exit, "_Exit");
}

void register_exit_join() {
  static bool done;  // the forking thread, outside any signal handler
  if (__atomic_exchange_n(&done, true, __ATOMIC_ACQ_REL)) return;
  // Registered at the first lazy fork, after the engine's own handler: it runs before the engine's BYE.
  on_exit(at_exit, nullptr);
}

}  // namespace revive::proctree

// A parent that leaves through _exit (a daemonizing fork(); _exit(0)) lets its unjoined children join
// first: the coordinator must never see the computation without them (it would end, or a checkpoint
// would go without them). exit() gets the same from register_exit_join's handler.
namespace {
[[noreturn]] void leave(revive::proctree::ExitFn* real_slot, const char* name, int status) {
  revive::proctree::join_children_before_leaving();
  auto real = revive::plugins::next_symbol(real_slot, name);
  if (real) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
}  // namespace

extern "C" {
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
  leave(&revive::proctree::g_real_exit, "_exit", status);
}
__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
  leave(&revive::proctree::g_real_Exit, "_Exit", status);
}
}
