// fork() and vfork(): the child is a new process of the computation. With a coordinator the child
// joins it lazily (docs/process-trees.md "Lazy join"): fork() returns at once, the parent keeps the child
// in a pending slot (pending.cpp) and any checkpoint pokes it and waits for it during its suspend phase,
// so that every checkpoint either precedes the fork or includes the child. Under a virtual-pid table the
// parent must return the child's virtual id: the child keeps its kernel pid unless the table names that
// pid (then it takes a fresh id), and only in that case does the parent wait, reading the id from the
// child's memory (vpid::child_id). The old eager join (the parent waits until the child has said HELLO
// over a socketpair) stays for when no slot is free, and under a table where we may not read our
// children (Yama ptrace_scope >= 2). Without a coordinator (a lone process under LD_PRELOAD, a
// standalone interval) there is nothing to join. A socketpair and a wake-up of each side per fork were
// most of what a fork cost beyond native (docs/performance.md "Virtual pids"). vfork() is a
// fork(): the vfork child runs on in its own copy of memory, which every correct vfork program
// tolerates, and our child re-initialisation (a thread, a socket) would corrupt a parent whose memory
// it shared.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject/fork_path.h"
#include "inject/sys.h"
#include "plugins/common/next_symbol.h"
#include "plugins/proctree/engine_hooks.h"
#include "plugins/proctree/proctree.h"
#include "plugins/vpid/vpid.h"

namespace revive::inject {
bool coord_configured() __attribute__((weak));  // the engine's (src/inject/plugin.h); null without it
}

namespace {

using ForkFn = pid_t (*)();
ForkFn g_real_fork;

// The lazy fork, in slot `slot` (taken by the caller between users_enter and here). Signals stay
// blocked in the child until it has dropped the parent's connection: a poke (or any wake-up) served
// before that would read the parent's coordinator socket. Raw: the signal plugin keeps programs from
// blocking our signal.
REVIVE_FORK_PATH pid_t lazy_fork(ForkFn real, int slot) {
  uint64_t all = ~uint64_t{0}, old = 0;
  // Inline system calls (inject/sys.h): libc's syscall() is our wrapper, one more page for the child.
  const int parent = revive::inject::sys::getpid();
  revive::inject::sys::sc(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
  pid_t pid = real();
  if (pid == 0) {
    revive::vpid::after_fork_child();
    revive::proctree::inflight_reset_in_child(slot);  // keeps its word in our page: the joined byte goes there
    revive::inject::after_fork_child_lazy(parent);
    revive::inject::sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
    return 0;
  }
  const int saved = errno;
  pid_t vid = pid;  // what the program is given
  if (pid > 0 && revive::vpid::active() && !revive::vpid::keeps_kernel_id(pid))
    vid = revive::vpid::child_id(pid);
  if (pid > 0) {
    revive::proctree::inflight_pending(slot, pid);
    revive::proctree::arm_join_timer();  // signals still blocked: no checkpoint parks us in the middle
  } else {
    revive::proctree::inflight_end(slot);
  }
  revive::inject::sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
  if (pid > 0) revive::proctree::register_exit_join();
  revive::proctree::users_leave();
  if (errno != saved) errno = saved;  // a store to a thread-local page would be one more fault
  return vid;
}

REVIVE_FORK_PATH pid_t tree_fork() {
  ForkFn real = revive::plugins::next_or_enosys(&g_real_fork, "fork");
  if (!real) return -1;
  // A child that has not joined yet joins before it forks: its own child must find it a member.
  if (revive::inject::coord_join_now) revive::inject::coord_join_now();
  // Never fork before this process's own HELLO is done (the engine's constructor says it; a fork from an
  // earlier constructor could come first): a short-lived child could be the coordinator's only process,
  // and its exit would end the coordinator.
  if (revive::inject::coord_wait_connected) revive::inject::coord_wait_connected(30000);
  const bool coord = revive::inject::coord_configured && revive::inject::coord_configured();
  const bool table = revive::vpid::active();
  if (!coord && (!table || revive::vpid::may_read_children())) {
    // No coordinator (a lone process under LD_PRELOAD, a restored one, a standalone interval): nothing
    // to join. Under a table only the child's id is to learn, and only when the table names its kernel
    // pid (child_id keeps errno).
    pid_t pid = real();
    if (pid == 0) {
      revive::vpid::after_fork_child();
      revive::proctree::inflight_reset_in_child(-1);
      if (revive::inject::after_fork_child) revive::inject::after_fork_child();
      return 0;
    }
    return pid > 0 && table && !revive::vpid::keeps_kernel_id(pid) ? revive::vpid::child_id(pid) : pid;
  }
  // Lazy join: fork() returns at once in both, the child joins later (docs/process-trees.md). Under a
  // virtual-pid table too (since 2026-11-28), when we may read our children's memory: the rare child
  // whose kernel pid the table names takes another id, which we read from it (vpid::child_id). Not
  // without a free slot (the checkpoint could not find the child).
  const bool may_lazy = coord && (!table || revive::vpid::may_read_children()) &&
                        revive::inject::after_fork_child_lazy && revive::inject::lazy_join_possible &&
                        revive::inject::lazy_join_possible();
  if (may_lazy) {
    revive::proctree::users_enter();
    // Children of earlier forks that answered give their slots back; those that ended only when slots
    // run short (a waitid each: in a fork+wait loop the previous child is one).
    if (revive::proctree::pending_children())
      revive::proctree::settle_pending(0, false, revive::proctree::pending_slots_scarce());
    const int slot = revive::proctree::inflight_begin_lazy();
    if (slot >= 0) return lazy_fork(real, slot);
    revive::proctree::inflight_end(slot);
    revive::proctree::users_leave();
  }
  // A socketpair, not a pipe: a checkpoint peeks at the byte without taking it (inflight_all_joined).
  int sync[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) != 0) sync[0] = sync[1] = -1;
  const int slot = revive::proctree::inflight_begin(sync[0]);
  uint64_t all = ~uint64_t{0}, old = 0;
  pid_t pid = real();
  if (pid == 0) {
    // Its own ids first (registered in the virtual-pid table if it has one), before anything asks.
    revive::vpid::after_fork_child();
    revive::proctree::inflight_reset_in_child(-1);
    if (sync[0] >= 0) close(sync[0]);
    // No checkpoint may suspend this child between its HELLO and its byte: the parent's checkpoint
    // decides on that byte.
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
    if (revive::inject::after_fork_child) revive::inject::after_fork_child();
    if (sync[1] >= 0) {
      char c = revive::proctree::joined_byte();
      // MSG_NOSIGNAL: a parent that did not wait has closed its end (EPIPE, no SIGPIPE).
      while (send(sync[1], &c, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
      }
      close(sync[1]);
    }
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
    return 0;
  }
  int saved = errno;
  if (sync[1] >= 0) close(sync[1]);
  // Without a coordinator, only an id the child may have to take from the table is worth the wait.
  const bool wait = coord || (pid > 0 && !revive::vpid::keeps_kernel_id(pid));
  if (pid > 0 && sync[0] >= 0 && wait) {
    char c;
    while (read(sync[0], &c, 1) < 0 && errno == EINTR) {  // EOF too: the child died before HELLO
    }
  }
  revive::proctree::inflight_end(slot);
  if (sync[0] >= 0) close(sync[0]);
  errno = saved;
  // The child registered its virtual pid before its byte (or died: then its kernel pid is all there is).
  return pid > 0 ? revive::vpid::to_virt(pid) : pid;
}

}  // namespace

extern "C" {
REVIVE_FORK_PATH __attribute__((visibility("default"))) pid_t fork() { return tree_fork(); }
REVIVE_FORK_PATH __attribute__((visibility("default"))) pid_t vfork() { return tree_fork(); }
REVIVE_FORK_PATH __attribute__((visibility("default"))) pid_t __fork() { return tree_fork(); }
}
