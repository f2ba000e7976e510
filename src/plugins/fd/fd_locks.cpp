// File locks the process holds at a checkpoint — flock (owned by an open file description), POSIX record
// locks (fcntl F_SETLK, owned by the process) and OFD locks (F_OFD_SETLK, owned by the description) — are
// taken again at restore, before the program runs: a lock a restarted process silently lost would let
// another process of the computation, blocked waiting for it, into the same critical section (sqlite's
// database locks, HDF5's file locking, `flock` in job scripts).
// Save reads each regular file's or directory's locks from /proc/self/fdinfo ("lock:" lines: the kernel
// shows there the locks set through that very description and owned by this process or the description)
// and writes them after the records (tag RVLK, count, LockRecord each). Restore takes them again without
// blocking; a lock someone else holds (the killed run's are released by its exit; a copy of the
// computation still running is another matter) is waited for up to 2 s, then the restore fails naming
// the fd, the file, the lock and the range. Leases are refused at checkpoint.
#include <errno.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/file_locks.h"
#include "plugins/common/msg.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

constexpr int kMaxLocks = 4096;
LockRecord g_locks[kMaxLocks];
int g_nlocks;

}  // namespace

int locks_save(Out& out, const int* fds, int n) {
  g_nlocks = 0;
  const pid_t self = static_cast<pid_t>(syscall(SYS_getpid));
  for (int k = 0; k < n; ++k) {
    const int fd = fds[k];
    struct stat st;
    if (inject::fd_reserved(fd) || fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) continue;
    // A dup shows its description's locks too: only the first number of each description keeps them.
    bool dup = false;
    for (int j = 0; j < g_nlocks && !dup; ++j)
      dup = g_locks[j].fd != fd && syscall(SYS_kcmp, self, self, KCMP_FILE, g_locks[j].fd, fd) == 0;
    if (dup) continue;
    char why[200];
    int got = file_locks_of(fd, g_locks + g_nlocks, kMaxLocks - g_nlocks, why, sizeof why);
    if (got < 0) return refuse_fd(fd, why, -ENOTSUP, false);
    g_nlocks += got;
  }
  out.tag(kLockTag);
  out.u32(static_cast<uint32_t>(g_nlocks));
  if (g_nlocks > 0) out.bytes(g_locks, sizeof(LockRecord) * static_cast<size_t>(g_nlocks));
  return 0;
}

int locks_restore(RestoreCtx& c) {
  if (c.in.remaining() == 0) return 0;  // a section from before version 7: no locks recorded
  char tag[4];
  uint32_t count = 0;
  if (!c.in.bytes(tag, sizeof tag) || memcmp(tag, kLockTag, sizeof tag) != 0 || (count = c.in.u32()) > kMaxLocks ||
      !c.in.ok() || c.in.remaining() != count * sizeof(LockRecord) ||
      !c.in.bytes(g_locks, count * sizeof(LockRecord))) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: malformed lock list"), EINVAL);
  }
  for (uint32_t k = 0; k < count; ++k) {
    const LockRecord& r = g_locks[k];
    if (r.kind < kFlock || r.kind > kOfd || r.fd < 0 || r.start < 0 || r.len < 0)
      return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: malformed lock record ").u(k), EINVAL);
    int e = file_lock_take(r);
    // The killed run's locks go with its exit; give a holder that is still leaving a moment.
    for (int tries = 0; (e == EAGAIN || e == EACCES || e == EWOULDBLOCK) && tries < 200; ++tries) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, nullptr);
      e = file_lock_take(r);
    }
    if (e != 0) {
      char link[48], path[PATH_MAX];
      Msg(link, sizeof link).s("/proc/self/fd/").i(r.fd);
      ssize_t l = readlink(link, path, sizeof path - 1);
      path[l > 0 ? l : 0] = '\0';
      Msg m(c.line, sizeof c.line);
      m.s("fd ").i(r.fd).s(" ('").s(path).s("'): cannot take its ").s(r.write ? "write " : "read ").s(file_lock_kind_name(r.kind));
      if (r.kind != kFlock) m.s(" of bytes ").i(r.start).s(r.len ? "-" : "-EOF");
      if (r.kind != kFlock && r.len) m.i(r.start + r.len - 1);
      m.s(" again");
      if (e == EAGAIN || e == EACCES) m.s(" (another process holds a conflicting lock: a copy of this computation still running?)");
      return fail(c.msg, c.cap, m, e);
    }
  }
  return 0;
}

}  // namespace revive::plugins
