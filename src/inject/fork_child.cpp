// The engine's half of fork() for process trees (src/plugins/proctree wraps fork and calls us in the
// child): the child is a new process of the computation. Only the forking thread came along (a thread of
// the parent serving the engine's work did not: g.serving starts over), no POSIX timer came along, and
// the parent's coordinator connection is not ours to use.
//
// The child joins the coordinator either at once (after_fork_child: the parent waits for it) or lazily
// (after_fork_child_lazy: fork() returns in both at once; docs/process-trees.md "Lazy join"). A lazy
// child joins, whichever comes first: before its own fork/exec/spawn goes on (coord_join_now, from the
// wrappers), when its one-shot join timer fires (kJoinAfterMs), or when its parent pokes it with the
// checkpoint signal because a checkpoint is being taken. The last two arrive as wake-ups and are served
// in the handler (serve_main calls join_finish first). Either way it then sends its parent the joined
// byte on the socketpair the fork wrapper made.
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "inject/engine.h"
#include "inject/hooks.h"
#include "inject/sys.h"
#include "plugins/proctree/engine_hooks.h"

namespace revive::inject {

namespace {

// Long enough that a child that _exits at once (the fork+wait loop, a shell's short job) never joins
// and never costs the coordinator anything; short enough that a living child is soon a member on its own.
constexpr long kJoinAfterMs = 30;

void reset_in_child() {
  g.upid = uint64_t(sys::getpid());  // until the coordinator's WELCOME names our upid
  g.image_fd = -1;
  g.ckpt_tid = 0;
  g.trigger = g.trigger_seen = 0;
  g.serving = 0;
  g.writer_pid = 0;  // the parent's forked checkpoint writer, not ours
  g.have_timer = false;
  g.have_join_timer = false;
  g.join_pending = false;
  g.join_sync_fd = -1;
  hooks_forked_child();
  g.joined_outside = true;  // until a WELCOME says otherwise
}

}  // namespace

bool after_fork_child() {
  reset_in_child();
  // Connect before fork() returns, so the parent (waiting in the wrapper) goes on only once we are in.
  bool ok = true;
  if (coord_configured() && coord_connect_now) ok = coord_connect_now(true);
  if (g.ready) arm_interval_timer();
  return ok;
}

bool lazy_join_possible() { return g.ready && g.cstack != nullptr; }

// Called with every signal blocked (the fork wrapper blocked them around fork): nothing may serve the
// parent's inherited connection before it is dropped here.
void after_fork_child_lazy(int sync_fd) {
  reset_in_child();
  coord_drop_inherited();
  g.join_sync_fd = sync_fd;
  g.join_pending = true;
  // No interval timer yet: unjoined, the engine would take this process for a standalone one.
  if (!g.ready || !signal_timer_create(&g.join_timer)) return;
  struct itimerspec its = {{0, 0}, {0, kJoinAfterMs * 1000000}};
  sys::sc(SYS_timer_settime, g.join_timer, 0, &its, nullptr);
  g.have_join_timer = true;
}

// With the serving flag held and every signal blocked (serve_main, coord_join_now).
void join_finish() {
  g.join_pending = false;
  if (g.have_join_timer) sys::sc(SYS_timer_delete, g.join_timer);
  g.have_join_timer = false;
  const bool ok = coord_configured() && coord_connect_now(false);
  const char c = ok && !g.joined_outside ? '1' : '0';
  if (g.join_sync_fd >= 0) {
    // MSG_NOSIGNAL: a parent that has gone closed its end (EPIPE, no SIGPIPE).
    sys::sc(SYS_sendto, g.join_sync_fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT, nullptr, 0);
    sys::sc(SYS_close, g.join_sync_fd);
  }
  g.join_sync_fd = -1;
  // The timer's signal or the parent's poke asked for this join, not for a standalone checkpoint.
  g.trigger_seen = __atomic_load_n(&g.trigger, __ATOMIC_ACQUIRE);
  if (g.ready) arm_interval_timer();
}

void coord_join_now() {
  if (!__atomic_load_n(&g.join_pending, __ATOMIC_ACQUIRE)) return;
  const uint64_t old = serving_enter();  // a handler on another thread of ours may be joining already
  if (g.join_pending) join_finish();
  serving_leave(old);
}

int coord_fd_for_exec() { return g.coord_fd; }

long checkpoint_writer_pid() { return g.writer_pid; }

bool coord_joined_outside() { return g.coord_fd < 0 || g.joined_outside; }

}  // namespace revive::inject
