// Keeps the engine's own descriptors (the coordinator socket; the image while it is written: fd_reserved)
// alive when the program closes "every descriptor": launchers do exactly that in a child between fork and
// exec (Open MPI's and MPICH's process starters, daemons, shells running with closefrom). Losing the
// coordinator socket there would leave the exec'd program outside the computation (DMTCP protects its
// descriptors the same way). close() of ours reports success and does nothing; close_range() skips ours;
// dup2()/dup3() onto ours first moves ours to another number, so the program gets the number it asked for.
// The dup family here also tells the signal plugin when a copy of a signalfd is made (sigfd_set.h), so
// reads of the copy give senders as the program knows them (virtual pids).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "coord/client.h"
#include "inject/engine.h"
#include "inject/sys.h"
#include "plugins/common/next_symbol.h"
#include "plugins/common/sigfd_set.h"
#include "plugins/plugins.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::inject {
namespace {

using CloseFn = int (*)(int);
using Dup3Fn = int (*)(int, int, int);
using DupFn = int (*)(int);
CloseFn g_close;
Dup3Fn g_dup3;
DupFn g_dup;

// The checkpoint signal is held while ours moves: its handler uses the coordinator socket.
struct HoldCheckpointSignal {
  uint64_t old = 0;
  HoldCheckpointSignal() {
    uint64_t set = 1ull << (g.cfg.sig - 1);
    sys::sc(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, 8);
  }
  ~HoldCheckpointSignal() { sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8); }
};

// Moves the engine's descriptor `fd` out of the way of the program's dup2/dup3 onto it.
bool move_reserved(int fd) {
  HoldCheckpointSignal hold;
  if (!fd_reserved(fd)) return true;  // the handler was done with it meanwhile
  long to = sys::sc(SYS_fcntl, fd, F_DUPFD, fd + 1);
  if (to < 0) return false;
  if (fd == g.coord_fd) coord_moved(int(to));
  if (fd == g.image_fd) g.image_fd = int(to);
  sys::sc(SYS_close, fd);
  return true;
}

}  // namespace

bool fd_move_reserved(int fd) { return move_reserved(fd); }

}  // namespace revive::inject

using namespace revive::inject;

REVIVE_EXPORT int close(int fd) {
  if (fd_reserved(fd)) return 0;
  CloseFn f = revive::plugins::next_or_enosys(&g_close, "close");
  return f ? f(fd) : -1;
}

REVIVE_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  // Close (or mark close-on-exec) the range around ours: the kernel call per piece.
  unsigned lo = first;
  int keep[2] = {g.coord_fd, g.image_fd};
  if (keep[0] > keep[1]) {
    int t = keep[0];
    keep[0] = keep[1];
    keep[1] = t;
  }
  for (int k : keep) {
    if (k < 0 || unsigned(k) < lo || unsigned(k) > last) continue;
    if (unsigned(k) > lo && sys::sc(SYS_close_range, lo, unsigned(k) - 1, flags) != 0) return -1;
    lo = unsigned(k) + 1;
    if (lo == 0) return 0;  // k was UINT_MAX
  }
  if (lo > last) return 0;
  long r = sys::sc(SYS_close_range, lo, last, flags);
  if (r < 0) {
    errno = int(-r);
    return -1;
  }
  return 0;
}

REVIVE_EXPORT int dup3(int oldfd, int newfd, int flags) {
  if (fd_reserved(oldfd)) {  // the program names a descriptor it does not have
    errno = EBADF;
    return -1;
  }
  if (fd_reserved(newfd) && !move_reserved(newfd)) {
    errno = EBUSY;
    return -1;
  }
  Dup3Fn f = revive::plugins::next_or_enosys(&g_dup3, "dup3");
  int r = f ? f(oldfd, newfd, flags) : -1;
  if (r >= 0) revive::plugins::sigfd_copied(oldfd, r);
  return r;
}

REVIVE_EXPORT int dup(int oldfd) {
  if (fd_reserved(oldfd)) {  // as dup3
    errno = EBADF;
    return -1;
  }
  DupFn f = revive::plugins::next_or_enosys(&g_dup, "dup");
  int r = f ? f(oldfd) : -1;
  if (r >= 0) revive::plugins::sigfd_copied(oldfd, r);
  return r;
}

REVIVE_EXPORT int dup2(int oldfd, int newfd) {
  if (oldfd == newfd) {  // dup2's own case: checks oldfd, changes nothing
    if (fd_reserved(oldfd)) {
      errno = EBADF;
      return -1;
    }
    return int(sys::sc(SYS_fcntl, oldfd, F_GETFD)) < 0 ? (errno = EBADF, -1) : newfd;
  }
  return dup3(oldfd, newfd, 0);
}
