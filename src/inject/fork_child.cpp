// The engine's half of fork() for process trees (src/plugins/proctree wraps fork and calls us in the
// child): the child is a new process of the computation. Only the forking thread came along; the
// parent's checkpoint thread did not, and the parent's coordinator connection is not ours to use.
#include <unistd.h>

#include "inject/engine.h"
#include "inject/sys.h"
#include "plugins/proctree/engine_hooks.h"

namespace revive::inject {

void start_checkpoint_thread();  // init.cpp

bool after_fork_child() {
  g.upid = uint64_t(sys::getpid());  // until the coordinator's WELCOME names our upid
  g.image_fd = -1;
  g.ckpt_tid = 0;
  g.trigger = 0;
  // Connect before fork() returns, so the parent (waiting in the wrapper) goes on only once we are in.
  bool ok = true;
  if (coord_configured() && coord_connect_now) ok = coord_connect_now(true);
  if (g.ready) start_checkpoint_thread();
  return ok;
}

int coord_fd_for_exec() { return g.coord_fd; }

}  // namespace revive::inject
