// The engine's half of fork() for process trees (src/plugins/proctree wraps fork and calls us in the
// child): the child is a new process of the computation. Only the forking thread came along (a thread of
// the parent serving the engine's work did not: g.serving starts over), no POSIX timer came along, and
// the parent's coordinator connection is not ours to use.
//
// The child joins the coordinator either at once (after_fork_child: the parent waits for it) or lazily
// (after_fork_child_lazy: fork() returns in both at once; docs/process-trees.md "Lazy join"). A lazy
// child joins, whichever comes first: before its own fork/exec/spawn goes on (coord_join_now, from the
// wrappers), or when its parent pokes it with the checkpoint signal: because the child is 30 ms old (the
// parent's join timer) or because a checkpoint is being taken. Pokes arrive as wake-ups and are served
// in the handler (serve_main calls join_finish first). Either way it then writes the joined byte into its
// word of the page its parent shares with its lazy children (src/plugins/proctree/pending.cpp).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "inject/fork_path.h"
#include "inject/engine.h"
#include "inject/hooks.h"
#include "inject/sys.h"
#include "plugins/proctree/engine_hooks.h"

namespace revive::proctree {
// The proctree plugin's (pending.cpp): the joined byte into our word of the parent's page.
void report_joined(char c) __attribute__((weak));
}  // namespace revive::proctree

namespace revive::inject {

namespace {

REVIVE_FORK_PATH void reset_in_child() {
  g.upid = uint64_t(sys::getpid());  // until the coordinator's WELCOME names our upid
  sys::set_if(g.image_fd, -1);
  // (ckpt_tid is set at each serve's start.)
  sys::set_if(g.trigger, 0);
  sys::set_if(g.trigger_seen, 0);
  sys::set_if(g.serving, 0);
  sys::set_if(g.writer_pid, 0);  // the parent's forked checkpoint writer, not ours
  sys::set_if(g.have_timer, false);
  sys::set_if(g.join_pending, false);
  sys::set_if(g.join_timer_fired, 0);
  hooks_forked_child();
  sys::set_if(g.joined_outside, true);  // until a WELCOME says otherwise
}

}  // namespace

REVIVE_FORK_PATH bool after_fork_child() {
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
REVIVE_FORK_PATH void after_fork_child_lazy(int parent_pid) {
  reset_in_child();
  coord_drop_inherited();
  // No interval timer yet: unjoined, the engine would take this process for a standalone one. No join
  // timer either: the parent pokes us when we are 30 ms old (src/plugins/proctree/pending.cpp), and if
  // it is killed first its death does (the checkpoint signal as our parent-death signal, a wake-up).
  g.join_pending = true;
  sys::sc(SYS_prctl, PR_SET_PDEATHSIG, g.cfg.sig);
  if (sys::sc(SYS_getppid) != parent_pid) wake_up();  // it died before the prctl: served when unblocked
}

// With the serving flag held and every signal blocked (serve_main, coord_join_now).
void join_finish() {
  g.join_pending = false;
  sys::sc(SYS_prctl, PR_SET_PDEATHSIG, 0);  // a member now: the parent's death is not a wake-up for us
  const bool ok = coord_configured() && coord_connect_now(false);
  const char c = ok && !g.joined_outside ? '1' : '0';
  if (proctree::report_joined) proctree::report_joined(c);
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
