// The fork wrappers' slots (proctree.h): forks in flight and fork children that have not joined the
// coordinator yet (lazy join, docs/process-trees.md). An eager fork's slot holds the parent's end of the
// socketpair on which its child writes its joined byte. A lazy child answers in a word of a page the
// parent maps shared (one page per parent, not a socketpair per fork: that was ~10 us of each fork,
// docs/performance.md "Virtual pids"): '1' in, '0' joined outside a checkpoint in progress; a child that
// ends before joining never writes, and waitid(WNOWAIT) tells the parent it is a zombie or reaped.
// Static tables, raw system calls: the checkpoint reads them with every other thread parked, from the
// checkpoint signal's handler.
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject/fork_path.h"
#include "inject/plugin.h"
#include "inject/sys.h"
#include "plugins/common/next_symbol.h"
#include "plugins/proctree/proctree.h"

namespace revive::proctree {

namespace {

// The words lazy children write their joined byte into (0 until then), and a sequence number the parent
// waits on (a shared futex: the children wake it).
struct JoinPage {
  volatile uint32_t word[kMaxInFlight];
  volatile uint32_t seq;
};
constexpr size_t kPageLen = 4096;
static_assert(sizeof(JoinPage) <= kPageLen);

constexpr long FUTEX_WAIT_SHARED = 0, FUTEX_WAKE_SHARED = 1;  // not _PRIVATE: the children wake us
constexpr int kLazySlot = -1;  // t.inflight_fd of a lazy fork's slot: no socket

// Every word the fork path writes, on one page: after fork() each page written is a copy-on-write fault
// (~1 us) in the parent (while the child lives) and in the child.
struct alignas(4096) Table {
  volatile int inflight_fd[kMaxInFlight];   // 0: free; kLazySlot: a lazy fork; else the sync fd + 1
  volatile int pending_pid[kMaxInFlight];   // > 0: fork() returned, the child joins lazily; 0: in flight
  volatile uint32_t busy[kMaxInFlight];     // 1 while someone settles the slot
  volatile uint64_t fork_ms[kMaxInFlight];  // when the pending child was forked (CLOCK_MONOTONIC ms)
  volatile uint32_t timer_poked[kMaxInFlight];  // the join timer poked it already
  volatile uint32_t pending_count;
  volatile uint32_t forks_in_flight;
  JoinPage* volatile page;  // this process's page for its lazy children (null until the first)
  volatile uint32_t users;  // threads using `page` outside the checkpoint (it is unmapped only at 0)
  // In a lazy child, until it joins: its word in its parent's page, and that page (unmapped after).
  volatile uint32_t* report;
  JoinPage* report_page;
  int timer_id1;  // the join timer's kernel id + 1; 0: none (zero-initialized, so no constructor runs)
  volatile uint32_t timer_armed;
};
static_assert(sizeof(Table) == 4096);
Table t;

// The answer of the last checkpoint's settle (children_join_now), read by the drain phase.
bool g_children_ok = true;
// The join timer: one POSIX timer per parent, not one per child (timer_create, settime and the exit's
// delete were ~2 us of every fork). Armed at a lazy fork when idle; when it fires (join_timer_due, in
// the handler) children pending for kJoinAfterMs are poked. Created and armed only by a forking thread
// with every signal blocked (so never while a checkpoint parks it); deleted in the suspend phase, so no
// image holds it (its kernel id could be one the timer plugin restores).

// Long enough that a child that _exits at once (the fork+wait loop, a shell's short job) never joins
// and never costs the coordinator anything; short enough that a living child is soon a member.
constexpr uint64_t kJoinAfterMs = 30;

// How long a checkpoint (or an exiting/exec'ing parent) waits for its poked children: long enough for a
// loaded machine's connect + HELLO, short of any phase timeout.
constexpr int kJoinWaitMs = 2000;
// The waits are cut in slices this long to look for children that ended (they never write); a poked
// child still silent after two is looked at closer (exec'ed past our wrappers?).
constexpr int kSliceMs = 10;

long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return syscall(n, a, b, c, d, e, f);
}

uint64_t mono_ms() {
  struct timespec ts;
  raw(SYS_clock_gettime, CLOCK_MONOTONIC, long(&ts));
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// libc's: the vDSO, no system call (the fork path reads it once per fork).
uint64_t clock_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

void timer_arm(uint64_t ms) {
  struct itimerspec its = {{0, 0}, {time_t(ms / 1000), long(ms % 1000) * 1000000}};
  __atomic_store_n(&t.timer_armed, 1u, __ATOMIC_SEQ_CST);
  raw(SYS_timer_settime, t.timer_id1 - 1, 0, long(&its), 0);
}

bool claim(int i) {
  uint32_t idle = 0;
  return __atomic_compare_exchange_n(&t.busy[i], &idle, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void unclaim(int i) { __atomic_store_n(&t.busy[i], 0u, __ATOMIC_RELEASE); }

// A claimed pending slot whose child has answered (or ended): free the slot.
void release_pending(int i) {
  __atomic_store_n(&t.pending_pid[i], 0, __ATOMIC_RELEASE);
  __atomic_sub_fetch(&t.pending_count, 1, __ATOMIC_ACQ_REL);
  __atomic_store_n(&t.inflight_fd[i], 0, __ATOMIC_RELEASE);
  unclaim(i);
}

// Whether our child `pid` is gone for us: a zombie (left without joining; in our image as one), reaped
// (waitid: ECHILD), or no longer mapping our page (it exec'ed past our wrappers; the new image joins on
// its own). `deep`: also the last test (a process_vm_readv of its word), for a child silent after a poke.
bool child_gone(int i, int pid, bool deep) {
  siginfo_t si;
  si.si_pid = 0;
  if (raw(SYS_waitid, P_PID, pid, long(&si), WEXITED | WNOHANG | WNOWAIT, 0) != 0 || si.si_pid == pid) return true;
  if (!deep || !t.page) return false;
  uint32_t v = 0;
  struct iovec local = {&v, sizeof v}, remote = {const_cast<uint32_t*>(&t.page->word[i]), sizeof v};
  return raw(SYS_process_vm_readv, pid, long(&local), 1, long(&remote), 1, 0) < 0 && errno == EFAULT;
}

using ExitFn = void (*)(int);
ExitFn g_real_exit, g_real_Exit;

}  // namespace

int inflight_begin(int sync_fd) {
  __atomic_add_fetch(&t.forks_in_flight, 1, __ATOMIC_ACQ_REL);
  if (sync_fd < 0) return -1;
  for (int i = 0; i < kMaxInFlight; ++i) {
    int free = 0;
    if (__atomic_compare_exchange_n(&t.inflight_fd[i], &free, sync_fd + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return i;
  }
  return -1;
}

void users_enter() { __atomic_add_fetch(&t.users, 1, __ATOMIC_ACQ_REL); }
void users_leave() { __atomic_sub_fetch(&t.users, 1, __ATOMIC_ACQ_REL); }

int inflight_begin_lazy() {
  __atomic_add_fetch(&t.forks_in_flight, 1, __ATOMIC_ACQ_REL);
  JoinPage* page = __atomic_load_n(&t.page, __ATOMIC_ACQUIRE);
  if (!page) {
    // Once per process (and again after a checkpoint unmapped it): shared, so the children's words land
    // in our memory; anonymous, so nothing outlives us.
    void* m = mmap(nullptr, kPageLen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    JoinPage* none = nullptr;
    if (!__atomic_compare_exchange_n(&t.page, &none, static_cast<JoinPage*>(m), false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
      munmap(m, kPageLen);  // another thread of ours was first
    page = __atomic_load_n(&t.page, __ATOMIC_ACQUIRE);
  }
  for (int i = 0; i < kMaxInFlight; ++i) {
    int free = 0;
    if (__atomic_compare_exchange_n(&t.inflight_fd[i], &free, kLazySlot, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      page->word[i] = 0;  // the slot's last child answered or is gone: it never writes again
      return i;
    }
  }
  return -1;
}

void inflight_end(int slot) {
  if (slot >= 0) __atomic_store_n(&t.inflight_fd[slot], 0, __ATOMIC_RELEASE);
  __atomic_sub_fetch(&t.forks_in_flight, 1, __ATOMIC_ACQ_REL);
}

void inflight_pending(int slot, pid_t pid) {
  // A slot still naming this pid is a child that was reaped (the kernel gave its pid to this one).
  for (int i = 0; i < kMaxInFlight; ++i) {
    if (i == slot || __atomic_load_n(&t.pending_pid[i], __ATOMIC_ACQUIRE) != int(pid) || !claim(i)) continue;
    if (__atomic_load_n(&t.pending_pid[i], __ATOMIC_ACQUIRE) == int(pid)) release_pending(i);
    else unclaim(i);
  }
  // pid first: from here the slot is the pending child's, not a fork in flight (a checkpoint that looks
  // in between counts one fork in flight without its byte and refuses, which is safe).
  t.fork_ms[slot] = clock_ms();
  t.timer_poked[slot] = 0;
  __atomic_store_n(&t.pending_pid[slot], int(pid), __ATOMIC_RELEASE);
  __atomic_add_fetch(&t.pending_count, 1, __ATOMIC_ACQ_REL);
  __atomic_sub_fetch(&t.forks_in_flight, 1, __ATOMIC_ACQ_REL);
}

void arm_join_timer() {
  if (__atomic_load_n(&t.timer_armed, __ATOMIC_SEQ_CST)) return;  // it will look at this child too
  if (t.timer_id1 == 0) {
    struct sigevent ev = {};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = inject::checkpoint_signal();
    ev.sigev_value.sival_int = inject::kJoinTimerTag;
    int id = -1;
    // Raw: the timer plugin's wrapper would take it for the program's.
    if (raw(SYS_timer_create, CLOCK_MONOTONIC, long(&ev), long(&id)) != 0) return;
    t.timer_id1 = id + 1;
  }
  timer_arm(kJoinAfterMs);
}

void join_timer_due() {
  __atomic_store_n(&t.timer_armed, 0u, __ATOMIC_SEQ_CST);
  if (!pending_children() || t.timer_id1 == 0) return;
  users_enter();
  settle_pending(0, false, true);  // the answered and the ended give their slots back
  const uint64_t now = clock_ms();
  uint64_t next = 0;  // ms until the next child is due
  for (int i = 0; i < kMaxInFlight; ++i) {
    const int pid = __atomic_load_n(&t.pending_pid[i], __ATOMIC_ACQUIRE);
    if (pid <= 0 || t.timer_poked[i]) continue;
    const uint64_t age = now - t.fork_ms[i];
    if (age + 1 >= kJoinAfterMs) {  // the timer may fire a little early against this clock
      t.timer_poked[i] = 1;
      raw(SYS_kill, pid, inject::checkpoint_signal());
    } else if (next == 0 || kJoinAfterMs - age < next) {
      next = kJoinAfterMs - age;
    }
  }
  if (next) timer_arm(next);
  users_leave();
}

REVIVE_FORK_PATH void inflight_reset_in_child(int lazy_slot) {
  // Only what is set is written: every page written here is a copy-on-write fault of every fork.
  if (__atomic_load_n(&t.page, __ATOMIC_ACQUIRE)) {
    t.report_page = t.page;
    t.report = lazy_slot >= 0 ? &t.page->word[lazy_slot] : nullptr;
    t.page = nullptr;
    if (lazy_slot < 0) report_joined(0);  // not a lazy child: only the parent's page to let go of
  }
  if (t.pending_count || t.forks_in_flight) {
    for (int i = 0; i < kMaxInFlight; ++i) {
      if (t.inflight_fd[i]) t.inflight_fd[i] = 0;
      if (t.pending_pid[i]) t.pending_pid[i] = 0;
      if (t.busy[i]) t.busy[i] = 0;
    }
    t.pending_count = 0;
    t.forks_in_flight = 0;
  }
  if (t.users) t.users = 0;
  if (t.timer_id1) t.timer_id1 = 0;  // timers are not inherited
  if (t.timer_armed) t.timer_armed = 0;
}

void report_joined(char c) {
  if (t.report && c) {
    __atomic_store_n(t.report, uint32_t(uint8_t(c)), __ATOMIC_RELEASE);
    __atomic_add_fetch(&t.report_page->seq, 1, __ATOMIC_ACQ_REL);
    raw(SYS_futex, long(&t.report_page->seq), FUTEX_WAKE_SHARED, INT_MAX);
  }
  t.report = nullptr;
  if (t.report_page) raw(SYS_munmap, long(t.report_page), long(kPageLen));
  t.report_page = nullptr;
}

// Runs in the checkpoint (every other thread parked): counts in-flight slots whose '1' waits unread.
bool inflight_all_joined() {
  uint32_t n = __atomic_load_n(&t.forks_in_flight, __ATOMIC_ACQUIRE), in = 0;
  if (n == 0) return true;
  for (int i = 0; i < kMaxInFlight; ++i) {
    int v = __atomic_load_n(&t.inflight_fd[i], __ATOMIC_ACQUIRE);
    if (v <= 0 || __atomic_load_n(&t.pending_pid[i], __ATOMIC_ACQUIRE) != 0) continue;  // lazy ones never are
    char c = 0;
    if (raw(SYS_recvfrom, v - 1, long(&c), 1, MSG_PEEK | MSG_DONTWAIT, 0, 0) == 1 && c == '1') ++in;
  }
  return in >= n;
}

REVIVE_FORK_PATH bool pending_children() { return __atomic_load_n(&t.pending_count, __ATOMIC_ACQUIRE) != 0; }

bool pending_slots_scarce() { return __atomic_load_n(&t.pending_count, __ATOMIC_ACQUIRE) >= kMaxInFlight / 2; }

bool settle_pending(int timeout_ms, bool poke, bool reap) {
  if (!pending_children()) return true;
  JoinPage* const page = __atomic_load_n(&t.page, __ATOMIC_ACQUIRE);
  if (!page) return true;  // no lazy child was ever forked with it (pending slots imply the page)
  bool poked[kMaxInFlight] = {};
  bool ok = true;
  uint64_t deadline = 0;
  uint32_t slices = 0;
  for (;;) {
    const uint32_t seq = __atomic_load_n(&page->seq, __ATOMIC_ACQUIRE);
    int nwait = 0;
    for (int i = 0; i < kMaxInFlight; ++i) {
      if (__atomic_load_n(&t.pending_pid[i], __ATOMIC_ACQUIRE) <= 0) continue;
      if (!claim(i)) {  // another thread of ours settles it (parked in the middle, at a checkpoint)
        ok = false;
        continue;
      }
      const int pid = __atomic_load_n(&t.pending_pid[i], __ATOMIC_ACQUIRE);
      if (pid <= 0) {  // settled meanwhile
        unclaim(i);
        continue;
      }
      uint32_t c = __atomic_load_n(&page->word[i], __ATOMIC_ACQUIRE);
      // Answered: '0' means it joined outside a checkpoint in progress (a member from now on, but not of
      // that generation). Otherwise, with `reap`, one that ended first: as a zombie it is in our image
      // (collect_zombies), reaped it is gone.
      if (c == 0 && reap && child_gone(i, pid, poked[i] && slices >= 2)) c = __atomic_load_n(&page->word[i], __ATOMIC_ACQUIRE);
      else if (c == 0) {
        // Still silent, so alive as far as we know: wake it once. A child that blocks the signal stays
        // unjoined until it unblocks it; the wait below is bounded.
        if (poke && !poked[i]) raw(SYS_kill, pid, inject::checkpoint_signal());
        poked[i] = true;
        ++nwait;
        unclaim(i);
        continue;
      }
      if (c != 0 && c != '1') ok = false;
      release_pending(i);
    }
    if (nwait == 0) return ok;
    if (timeout_ms == 0) return false;
    const uint64_t now = mono_ms();
    if (deadline == 0) deadline = now + uint64_t(timeout_ms);
    if (now >= deadline) return false;
    // Woken by an answer; every slice also looks for children that ended (they never write).
    struct timespec ts = {0, long(deadline - now < uint64_t(kSliceMs) ? deadline - now : kSliceMs) * 1000000};
    raw(SYS_futex, long(&page->seq), FUTEX_WAIT_SHARED, seq, long(&ts));
    ++slices;
  }
}

void children_join_now() {
  bool ok = settle_pending(kJoinWaitMs, true, true);
  // The page stays out of the image (and so out of every restored process): unmapped when no thread of
  // ours uses it, no fork is in flight and no child is pending; the next lazy fork maps a new one.
  JoinPage* page = __atomic_load_n(&t.page, __ATOMIC_ACQUIRE);
  if (page && ok && !pending_children() && __atomic_load_n(&t.users, __ATOMIC_ACQUIRE) == 0 &&
      __atomic_load_n(&t.forks_in_flight, __ATOMIC_ACQUIRE) == 0) {
    t.page = nullptr;
    raw(SYS_munmap, long(page), long(kPageLen));
    page = nullptr;
  }
  // A page still mapped is a thread of ours parked while using it: taken again a moment later.
  g_children_ok = ok && !page;
  drop_join_timer();
}

void drop_join_timer() {
  if (!t.timer_id1) return;
  raw(SYS_timer_delete, t.timer_id1 - 1);
  t.timer_id1 = 0;
  t.timer_armed = 0;
}

bool children_joined_at_suspend() {
  const bool ok = g_children_ok;
  g_children_ok = true;
  return ok;
}

REVIVE_FORK_PATH void join_children_before_leaving() {
  if (!pending_children()) return;  // every fork child's _exit: no store (a copy-on-write fault)
  users_enter();
  settle_pending(kJoinWaitMs, true, true);
  users_leave();
}

namespace {
void at_exit(int, void*) { join_children_before_leaving(); }
}  // namespace

void pending_init() {
  // Now, not in a child's _exit (dlsym there would cost every short-lived child its lookups).
  plugins::next_symbol(&g_real_exit, "_exit");
  plugins::next_symbol(&g_real_Exit, "_Exit");
  // The fork table's page, read by every fork child (inflight_reset_in_child): mapped here once, so that
  // a parent that never forked lazily does not leave each child a page fault on it.
  inject::sys::touch_pages(&t, sizeof t);
}

void register_exit_join() {
  static bool done;  // the forking thread, outside any signal handler
  // A load first: a store at every fork would be a copy-on-write fault of the parent's page.
  if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&done, true, __ATOMIC_ACQ_REL)) return;
  // Registered at the first lazy fork, after the engine's own handler: it runs before the engine's BYE.
  on_exit(at_exit, nullptr);
}

}  // namespace revive::proctree

// A parent that leaves through _exit (a daemonizing fork(); _exit(0)) lets its unjoined children join
// first: the coordinator must never see the computation without them (it would end, or a checkpoint
// would go without them). exit() gets the same from register_exit_join's handler.
namespace {
REVIVE_FORK_PATH [[noreturn]] void leave(revive::proctree::ExitFn* real_slot, const char* name, int status) {
  revive::proctree::join_children_before_leaving();
  auto real = revive::plugins::next_symbol(real_slot, name);
  if (real) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
}  // namespace

extern "C" {
REVIVE_FORK_PATH __attribute__((visibility("default"), noreturn)) void _exit(int status) {
  leave(&revive::proctree::g_real_exit, "_exit", status);
}
REVIVE_FORK_PATH __attribute__((visibility("default"), noreturn)) void _Exit(int status) {
  leave(&revive::proctree::g_real_Exit, "_Exit", status);
}
}
