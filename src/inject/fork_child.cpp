// The engine's half of fork() for process trees (src/plugins/proctree wraps fork and calls us in the
// child): the child is a new process of the computation. Only the forking thread came along (a thread of
// the parent serving the engine's work did not: g.serving starts over), no POSIX timer came along, and
// the parent's coordinator connection is not ours to use.
#include <unistd.h>

#include "inject/engine.h"
#include "inject/hooks.h"
#include "inject/sys.h"
#include "plugins/proctree/engine_hooks.h"

namespace revive::inject {

bool after_fork_child() {
  g.upid = uint64_t(sys::getpid());  // until the coordinator's WELCOME names our upid
  g.image_fd = -1;
  g.ckpt_tid = 0;
  g.trigger = g.trigger_seen = 0;
  g.serving = 0;
  g.writer_pid = 0;  // the parent's forked checkpoint writer, not ours
  g.have_timer = false;
  hooks_forked_child();
  // Connect before fork() returns, so the parent (waiting in the wrapper) goes on only once we are in.
  bool ok = true;
  g.joined_outside = true;  // until a WELCOME says otherwise
  if (coord_configured() && coord_connect_now) ok = coord_connect_now(true);
  if (g.ready) arm_interval_timer();
  return ok;
}

int coord_fd_for_exec() { return g.coord_fd; }

long checkpoint_writer_pid() { return g.writer_pid; }

bool coord_joined_outside() { return g.coord_fd < 0 || g.joined_outside; }

}  // namespace revive::inject
