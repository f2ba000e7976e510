// fd plugin, restore side: reopens every saved descriptor at its number with its flags and offset, and
// applies the documented policies (docs/plugins.md) for files that changed or vanished and for kinds whose
// state is not (yet) saved.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/prctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/same_open.h"
#include "plugins/common/section_io.h"
#include "plugins/common/sigfd_set.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/fd/fd_record.h"
#include "plugins/plugins.h"

// The chan plugin's (chan_connect.cpp); weak: null when it is not linked in (plugin tests).
extern "C" bool revive_chan_restores(int fd) __attribute__((weak));

namespace revive::plugins {
namespace {

using Ctx = RestoreCtx;

bool has_prefix(const char* s, const char* p) { return strncmp(s, p, strlen(p)) == 0; }

// Kernel pseudo-files (/proc, /sys): their size and mtime mean nothing, and one that cannot be opened
// again (another machine, a process that is gone) must not stop the restart.
bool pseudo_file(const char* path) { return has_prefix(path, "/proc/") || has_prefix(path, "/sys/"); }

// /proc/<pid at checkpoint>/... named the process itself (readlink resolves /proc/self): the restored
// process is /proc/self again, under a new pid. Rewrites path in place.
void map_proc_self(char* path, uint32_t old_pid) {
  char prefix[32];
  Msg(prefix, sizeof prefix).s("/proc/").u(old_pid);
  size_t n = strlen(prefix);
  if (strncmp(path, prefix, n) != 0 || (path[n] != '/' && path[n] != '\0')) return;
  const char self[] = "/proc/self";
  size_t tail = strlen(path + n) + 1;
  memmove(path + sizeof self - 1, path + n, tail);  // "self" is at most as long as a pid: no overflow
  memcpy(path, self, sizeof self - 1);
}

}  // namespace

int place(Ctx& c, int tmp, const FdRecord& rec) {
  int cloexec = rec.fd_flags & FD_CLOEXEC;
  if (tmp == rec.fd) {
    if (fcntl(tmp, F_SETFD, cloexec) == 0) return 0;
  } else if (dup3(tmp, rec.fd, cloexec ? O_CLOEXEC : 0) >= 0) {
    close(tmp);
    return 0;
  }
  int e = errno;
  close(tmp);
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot place descriptor: ").err(e), e);
}

namespace {

// What the restarter handed over (kHandOverTag): descriptors of shared open file descriptions, inherited
// from the process that recreated each one in the tree's skeleton (tree_spawn.cpp). Static: restore runs
// on one thread, without allocation.
FdHandOver g_handed[kMaxHandOver];
uint32_t g_nhanded;

int handed_over(int fd) {
  for (uint32_t i = 0; i < g_nhanded; ++i)
    if (g_handed[i].fd == fd) return g_handed[i].inherited;
  return -1;
}

// A kStoredInShm record's description shared with other processes: `revive restart` hands it down
// (REVIVE_FD_SHARED, first) before the restarter adds the mapped object for the same fd; only then are
// there two hand-overs for fd. -1: only the object.
int handed_description(int fd) {
  int first = -1;
  for (uint32_t i = 0; i < g_nhanded; ++i)
    if (g_handed[i].fd == fd) {
      if (first >= 0) return first;
      first = g_handed[i].inherited;
    }
  return -1;
}

bool is_inherited(int fd) {
  for (uint32_t i = 0; i < g_nhanded; ++i)
    if (g_handed[i].inherited == fd) return true;
  return false;
}

void close_handed() {
  for (uint32_t i = 0; i < g_nhanded; ++i) close(g_handed[i].inherited);  // EBADF for repeats: harmless
  g_nhanded = 0;
}

// /proc/self/exe names the restarter until the program's executable is set again. The kernel refuses
// (EBUSY) while the old executable is still mapped: restore runs after the engine unmapped the
// restarter, so now it can. PR_SET_MM_MAP (the map the restarter set, with exe_fd) needs
// CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN; PR_SET_MM_EXE_FILE needs CAP_SYS_RESOURCE. Without either,
// /proc/self/exe keeps naming the restarter (docs/process-trees.md), silently: the program runs on.
void set_exe(int exe_fd, const prctl_mm_map* mm, Ctx& c) {
  if (exe_fd < 0) return;
  int rc = -1;
  if (mm) {
    prctl_mm_map m = *mm;
    m.exe_fd = static_cast<uint32_t>(exe_fd);
    rc = prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof m, 0);
  }
  if (rc != 0) rc = prctl(PR_SET_MM, PR_SET_MM_EXE_FILE, exe_fd, 0, 0);
  if (rc != 0 && errno != EPERM)
    warn(Msg(c.line, sizeof c.line).s("cannot make /proc/self/exe name the program again: ").err(errno).c_str());
  close(exe_fd);
}

int seek(Ctx& c, int fd, const FdRecord& rec, const char* path) {
  if (rec.offset < 0 || lseek(fd, rec.offset, SEEK_SET) == rec.offset) return 0;
  int e = errno;
  close(fd);
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot seek '").s(path).s("' to ")
      .i(rec.offset).s(": ").err(e), e);
}

// Regular file: same path, flags, offset. A file open for writing that grew since the checkpoint is cut
// back to its checkpoint size (what the program wrote after the checkpoint is written again after restart,
// so appended output comes out identical); a file that shrank or vanished is an error naming it.
// fd 0/1/2 saved as a regular file that `revive restart` itself has at the same number, opened the same way
// (`revive run ... >job.log 2>&1`: the supervisor, its restart and the job all write one description):
// that description is taken again instead of a new one, so the job and whoever launched the restart
// share one offset as they did at launch. A new description kept its own offset: the supervisor's next
// line landed past the end the restore cut the file back to (a run of NUL bytes), and the job's writes
// overwrote the supervisor's. -1 when it is another file or opened otherwise.
int restart_stdio(const FdRecord& rec, const char* path) {
  return rec.fd <= 2 && same_open_file(rec.fd, path, int(rec.flags)) ? fcntl(rec.fd, F_DUPFD_CLOEXEC, 0) : -1;
}

int reopen_regular(Ctx& c, const FdRecord& rec, const char* path) {
  // A description shared with other processes of the tree arrives inherited: share it (one offset for
  // all); size policy and offset are then applied to it as to a reopened file (every sharer applies the
  // same size and offset, all before any of them runs user code).
  int inherited = handed_over(rec.fd);
  int fd = inherited >= 0 ? fcntl(inherited, F_DUPFD_CLOEXEC, 0) : restart_stdio(rec, path);
  if (inherited < 0 && fd < 0) fd = open(path, rec.flags | O_CLOEXEC);
  bool pseudo = pseudo_file(path);
  if (pseudo) {
    if (fd < 0) return stand_in(c, rec, path, "cannot be reopened");
    if (rec.offset > 0) lseek(fd, rec.offset, SEEK_SET);  // best effort: the contents are generated
    return place(c, fd, rec);
  }
  if (fd < 0) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot reopen '").s(path)
        .s("'").s(e == ENOENT ? " (vanished since the checkpoint)" : "").s(": ").err(e), e);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": '").s(path)
        .s("' is no longer a regular file"), EINVAL);
  }
  bool writable = (rec.flags & O_ACCMODE) != O_RDONLY;
  if (rec.fd_flags & kFdOutside) {
    // Shared with writers outside the computation (outside_files.h): what they wrote since the
    // checkpoint stays, and a file they cut shorter is not an error. The program writes on at its saved
    // offset, or at the end when the file is now shorter than that (never past it: no hole).
    FdRecord at = rec;
    if (at.offset > st.st_size) at.offset = st.st_size;
    int rc = seek(c, fd, at, path);
    return rc ? rc : place(c, fd, rec);
  }
  if (st.st_size < rec.size) {
    close(fd);
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": file '").s(path).s("' shrank from ")
        .i(rec.size).s(" to ").i(st.st_size).s(" bytes since the checkpoint"), ESTALE);
  }
  if (st.st_size > rec.size && writable) {
    if (ftruncate(fd, rec.size) != 0) {
      int e = errno;
      close(fd);
      return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot truncate '").s(path)
          .s("' back to its checkpoint size ").i(rec.size).s(": ").err(e), e);
    }
  } else if (st.st_size != rec.size || st.st_mtim.tv_sec != rec.mtime_sec || st.st_mtim.tv_nsec != rec.mtime_nsec) {
    if (!writable) {
      warn(Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": read-only file '").s(path)
          .s("' was modified since the checkpoint; reading on from the saved offset").c_str());
    }
  }
  int rc = seek(c, fd, rec, path);
  return rc ? rc : place(c, fd, rec);
}

// A deleted file's description `revive restart` handed down (inherited): shared, so one offset for all
// its holders, put at the saved offset.
int take_description(Ctx& c, const FdRecord& rec, const char* path, int inherited) {
  int fd = fcntl(inherited, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd)
        .s(": cannot take the deleted file '").s(path).s("' handed over by revive restart: ").err(e), e);
  }
  int rc = seek(c, fd, rec, path);
  return rc ? rc : place(c, fd, rec);
}

// Deleted-but-open file: recreated as an unlinked file (memfd for memfds, else O_TMPFILE in its old
// directory or /tmp) holding the saved contents, then reopened with the saved flags.
// A deleted file the process mapped shared (kStoredInShm): the restarter mapped the object at the saved address
// and handed it over for this fd; a new description of that same object, reopened through /proc.
int reopen_shm_object(Ctx& c, const FdRecord& rec, const char* path) {
  uint64_t at = 0;
  if (!c.in.bytes(&at, sizeof at))
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: truncated in fd ").i(rec.fd), EINVAL);
  // The description other holders share (they hold the file without mapping it): take that one, so the
  // offset stays shared as before the checkpoint (issue 13).
  if (int shared = handed_description(rec.fd); shared >= 0) return take_description(c, rec, path, shared);
  const int obj = handed_over(rec.fd);
  if (obj < 0) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": deleted file '").s(path)
        .s("' is the shared memory mapped at address ").u(at).s(", but the restart handed no object for it"), ENOENT);
  }
  char link[32];
  Msg(link, sizeof link).s("/proc/self/fd/").i(obj);
  int fd = open(link, rec.flags | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot reopen the shared memory ")
        .s("object of deleted file '").s(path).s("': ").err(e), e);
  }
  int rc = seek(c, fd, rec, path);
  return rc ? rc : place(c, fd, rec);
}

// A deleted inode several processes held: `revive restart` recreated it once and handed this record's
// description down (inherited, like a shared regular file's); contents stored here were written into it
// there, so they are skipped.
int share_recreated(Ctx& c, const FdRecord& rec, const char* path, int inherited) {
  if (rec.content_len > 0 && !c.in.skip(static_cast<size_t>(rec.content_len)))
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: truncated in fd ").i(rec.fd), EINVAL);
  return take_description(c, rec, path, inherited);
}

// Another descriptor of the same deleted inode stores its contents (kStoredByHolder). In this process, at
// a lower number: restored already, so this is a new description of that recreated inode, with its own
// flags and offset. In another process: only `revive restart` can give both one inode (share_recreated);
// without it the contents are not here, and a copy of nothing would be a silent substitution.
int reopen_by_holder(Ctx& c, const FdRecord& rec, const char* path) {
  DeletedHolder h{};
  if (!c.in.bytes(&h, sizeof h))
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: truncated in fd ").i(rec.fd), EINVAL);
  if (h.pid != c.old_pid || h.fd < 0 || h.fd >= rec.fd) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("process ").u(c.old_pid).s(" fd ").i(rec.fd)
        .s(": the contents of deleted file '").s(path).s("' are stored once, in the image of process ").u(h.pid)
        .s(" (fd ").i(h.fd).s("), and this restart did not recreate the file from it (restart all of the")
        .s(" checkpoint's images together, with revive restart)"), ENOENT);
  }
  char link[32];
  Msg(link, sizeof link).s("/proc/self/fd/").i(h.fd);
  int fd = open(link, rec.flags | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot open deleted file '").s(path)
        .s("' again through fd ").i(h.fd).s(": ").err(e), e);
  }
  int rc = seek(c, fd, rec, path);
  return rc ? rc : place(c, fd, rec);
}

int recreate_deleted(Ctx& c, const FdRecord& rec, const char* path) {
  if (rec.stored == kStoredInShm) return reopen_shm_object(c, rec, path);
  if (int inherited = handed_over(rec.fd); inherited >= 0) return share_recreated(c, rec, path, inherited);
  if (rec.stored == kStoredByHolder) return reopen_by_holder(c, rec, path);
  char dir[PATH_MAX];
  size_t n = strlen(path);
  constexpr size_t kSuffix = sizeof " (deleted)" - 1;
  memcpy(dir, path, n + 1);
  if (n >= kSuffix) dir[n - kSuffix] = '\0';
  int tmp = -1;
  if (strncmp(dir, "/memfd:", 7) == 0) {
    tmp = memfd_create(dir + 7, MFD_CLOEXEC);
  } else {
    char* slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = '\0';
    tmp = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, rec.mode & 07777);
    if (tmp < 0) tmp = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, rec.mode & 07777);
  }
  if (tmp < 0) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot recreate deleted file '")
        .s(path).s("': ").err(e), e);
  }
  char buf[8192];
  for (int64_t left = rec.content_len; left > 0;) {
    size_t want = static_cast<size_t>(left < (int64_t)sizeof buf ? left : (int64_t)sizeof buf);
    if (!c.in.bytes(buf, want)) {
      close(tmp);
      return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: truncated in the contents of fd ").i(rec.fd), EINVAL);
    }
    for (size_t off = 0; off < want;) {
      ssize_t w = write(tmp, buf + off, want - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int e = errno ? errno : EIO;
        close(tmp);
        return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot write deleted file '")
            .s(path).s("' back: ").err(e), e);
      }
      off += static_cast<size_t>(w);
    }
    left -= static_cast<int64_t>(want);
  }
  // Reopen through /proc to get the saved access mode and O_APPEND on the same inode.
  char link[32];
  Msg(link, sizeof link).s("/proc/self/fd/").i(tmp);
  int fd = open(link, rec.flags | O_CLOEXEC);
  int e = errno;
  close(tmp);
  if (fd < 0) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot reopen recreated '")
        .s(path).s("': ").err(e), e);
  }
  int rc = seek(c, fd, rec, path);
  return rc ? rc : place(c, fd, rec);
}

// Directory: same path; a vanished one is an error like a vanished file (except under /proc, /sys).
int reopen_directory(Ctx& c, const FdRecord& rec, const char* path) {
  int fd = open(path, rec.flags | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (pseudo_file(path)) return stand_in(c, rec, path, "cannot be reopened");
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot reopen directory '")
        .s(path).s("': ").err(e), e);
  }
  if (rec.offset > 0) lseek(fd, rec.offset, SEEK_SET);  // best effort: a directory cookie need not survive
  return place(c, fd, rec);
}

}  // namespace

// Kinds whose state is not saved: a /dev/null stand-in at the same number, so the program's reads see EOF
// and its writes vanish instead of hitting EBADF or, worse, another file reusing the number.
int stand_in(Ctx& c, const FdRecord& rec, const char* path, const char* why) {
  if (why) warn(Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (").s(fd_kind_name(rec.kind)).s(" ").s(path)
      .s(") ").s(why).s("; replaced by /dev/null").c_str());
  int fd = open("/dev/null", O_RDWR | O_CLOEXEC | (rec.flags & O_NONBLOCK));
  if (fd < 0) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot open /dev/null: ").err(e), e);
  }
  return place(c, fd, rec);
}

namespace {

// A descriptor that shared an earlier one's open file description shares it again (one offset, e.g.
// `prog >log 2>&1`), whatever the earlier one became.
int restore_dup(Ctx& c, const FdRecord& rec, const char* path) {
  int cloexec = rec.fd_flags & FD_CLOEXEC;
  if (dup3(rec.dup_of, rec.fd, cloexec ? O_CLOEXEC : 0) >= 0) return 0;
  int e = errno;
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" ('").s(path).s("'): cannot share fd ")
      .i(rec.dup_of).s(" again: ").err(e), e);
}

int restore_one(Ctx& c, const FdRecord& rec, const char* path) {
  auto kind = static_cast<FdKind>(rec.kind);
  bool stdio = rec.fd <= 2;
  bool file = kind == FdKind::kRegular || kind == FdKind::kDeleted || kind == FdKind::kDirectory ||
              kind == FdKind::kCharDev;
  // 0/1/2 that were a terminal, pipe or socket stay connected to whatever `revive restart` got.
  if (stdio && !file) return 0;
  if (rec.dup_of >= 0) return restore_dup(c, rec, path);
  switch (kind) {
    case FdKind::kRegular: return reopen_regular(c, rec, path);
    case FdKind::kDeleted: return recreate_deleted(c, rec, path);
    case FdKind::kDirectory: return reopen_directory(c, rec, path);
    case FdKind::kCharDev: {
      // A device of this machine only (a GPU, an HCA, a pty) may not exist where the process restarts.
      int fd = open(path, rec.flags | O_CLOEXEC);
      return fd >= 0 ? place(c, fd, rec) : stand_in(c, rec, path, "cannot be reopened");
    }
    case FdKind::kTerminal: {
      // A pty pair the chan plugin (after this one) makes again or widows: the stand-in only holds the
      // number. Opening /dev/ptmx here would make an unrelated pair, /dev/pts/N maybe another's slave.
      if (revive_chan_restores && revive_chan_restores(rec.fd)) return stand_in(c, rec, path, nullptr);
      int fd = open(path, rec.flags | O_NOCTTY | O_CLOEXEC);
      if (fd >= 0) return place(c, fd, rec);
      return stand_in(c, rec, path, "cannot be reopened");
    }
    case FdKind::kEventfd:
    case FdKind::kTimerfd:
    case FdKind::kSignalfd:
    case FdKind::kEpoll:
    case FdKind::kInotify:
      if (int inherited = handed_over(rec.fd); inherited >= 0) {
        // A shared epoll instance: each holder registers again, into the one instance, the targets it
        // holds (the same file at the same number in two holders: the second gets EEXIST, said by no one),
        // so the interest list is whole again however the holders divide it.
        if (kind == FdKind::kEpoll) return restore_shared_epoll(c, rec, inherited);
        if (kind == FdKind::kInotify) return restore_shared_inotify(c, rec, inherited);
        // An eventfd or timerfd shared with other processes of the tree (inherited across fork): `revive
        // restart` made it once, with the saved state, and handed it down, so a write by one wakes the
        // others again, an expiration read by one is read, a re-arm is seen by all (before 2026-11-28 each
        // process got one of its own: a child waiting for its parent's write waited for ever). A signalfd
        // too (2026-11-29): a mask one holder sets with signalfd(fd, ...) is the others' mask, and
        // O_NONBLOCK one sets is theirs; an epoll's interest list (above). The state that follows the
        // record is the owner's too.
        if (rec.content_len > 0 && !c.in.skip(static_cast<size_t>(rec.content_len)))
          return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": truncated record"), EINVAL);
        int fd = fcntl(inherited, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
          return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": cannot take the ")
              .s(fd_kind_name(rec.kind)).s(" handed over by revive restart: ").err(errno), errno);
        if (kind == FdKind::kSignalfd) sigfd_mark(fd);  // its reads give senders as the program knows them
        return place(c, fd, rec);
      }
      if (kind == FdKind::kSignalfd) return restore_signalfd(c, rec, path);
      if (kind == FdKind::kEpoll) return restore_epoll(c, rec, path);
      if (kind == FdKind::kInotify) return restore_inotify(c, rec, path);
      return kind == FdKind::kEventfd ? restore_eventfd(c, rec, path) : restore_timerfd(c, rec, path);
    case FdKind::kPipe:
      if (rec.peer_fd >= 0) return restore_local_pipe(c, rec);
      [[fallthrough]];
    case FdKind::kSocket:
    case FdKind::kFifo:
      // The chan plugin (after this one) puts the real channel here: the stand-in only holds the number.
      // Its state follows the record then too (a standalone checkpoint records both), and is skipped.
      if (revive_chan_restores && revive_chan_restores(rec.fd)) {
        if (rec.content_len > 0 && !c.in.skip(static_cast<size_t>(rec.content_len)))
          return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(": truncated record"), EINVAL);
        return stand_in(c, rec, path, nullptr);
      }
      if (kind == FdKind::kSocket && rec.content_len > 0) return restore_socket(c, rec);  // fd_socket.cpp
      return stand_in(c, rec, path, "cannot be restored");
    case FdKind::kOther:
      return stand_in(c, rec, path, "cannot be restored");
  }
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: fd ").i(rec.fd).s(" has unknown kind ").u(rec.kind), EINVAL);
}

// Structural checks of a record before anything is acted on (a damaged section must fail cleanly).
bool record_ok(const FdRecord& rec, int prev, size_t remaining) {
  auto kind = static_cast<FdKind>(rec.kind);
  bool has_content = kind == FdKind::kDeleted || kind == FdKind::kEventfd || kind == FdKind::kTimerfd ||
                     kind == FdKind::kEpoll || kind == FdKind::kSignalfd || kind == FdKind::kInotify || (kind == FdKind::kSocket && rec.fd > 2) ||
                     (kind == FdKind::kPipe && rec.peer_fd >= 0 && rec.peer_fd < rec.fd);
  bool peer_ok = rec.peer_fd == -1 ||
                 (kind == FdKind::kPipe && rec.fd > 2 && rec.peer_fd > 2 && rec.peer_fd != rec.fd && rec.dup_of < 0);
  bool share_ok = rec.share_pid == 0 ? rec.share_fd == -1
                                     : rec.share_fd >= 0 &&
                                           (kind == FdKind::kRegular || kind == FdKind::kDeleted || kind == FdKind::kEventfd ||
                                            kind == FdKind::kTimerfd || kind == FdKind::kSignalfd || kind == FdKind::kEpoll ||
                                            kind == FdKind::kInotify) &&
                                           rec.dup_of < 0;
  bool stored_ok = rec.stored == kStoredHere ||
                   (rec.stored == kStoredInShm && kind == FdKind::kDeleted && rec.dup_of < 0 &&
                    rec.content_len == int64_t(sizeof(uint64_t))) ||
                   (rec.stored == kStoredByHolder && kind == FdKind::kDeleted && rec.dup_of < 0 &&
                    rec.content_len == int64_t(sizeof(DeletedHolder)));
  return rec.fd > prev && share_ok && stored_ok && (rec.flags & ~kReopenFlags) == 0 && rec.kind >= 1 && rec.kind <= kMaxFdKind &&
         rec.dup_of >= -1 && rec.dup_of < rec.fd && (rec.dup_of < 0 || rec.content_len == 0) && peer_ok &&
         rec.content_len >= 0 && (has_content || rec.content_len == 0) &&
         rec.content_len <= static_cast<int64_t>(remaining);
}

}  // namespace

namespace {

// The restarter's hand-over prefix, if any (kHandOverTag), then the section's own tag. 0, or -EINVAL with
// the message written.
int read_hand_over(Ctx& c) {
  g_nhanded = 0;
  char tag[4];
  bool ok = c.in.bytes(tag, sizeof tag);
  if (ok && memcmp(tag, kHandOverTag, sizeof tag) == 0) {
    int32_t exe_fd = static_cast<int32_t>(c.in.u32());
    uint32_t mm_len = c.in.u32();
    prctl_mm_map mm;
    bool have_mm = mm_len == sizeof mm && c.in.bytes(&mm, sizeof mm);
    uint32_t n = c.in.u32();
    if (!c.in.ok() || (mm_len != 0 && !have_mm) || n > kMaxHandOver ||
        !c.in.bytes(g_handed, n * sizeof(FdHandOver))) {
      return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: malformed hand-over from the restarter"),
                  EINVAL);
    }
    g_nhanded = n;
    set_exe(exe_fd, have_mm ? &mm : nullptr, c);  // first: exe_fd may sit on a number a record needs
    ok = c.in.bytes(tag, sizeof tag);
  }
  if (ok && memcmp(tag, kFdTag, sizeof tag) == 0) return 0;
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd section: bad tag (not an fd section)"), EINVAL);
}

}  // namespace

int fd_restore(inject::SectionReader& r, char* msg, size_t cap) {
  In in(r);
  Ctx c{in, msg, cap, 0, {}};
  if (int rc = read_hand_over(c); rc != 0) {
    close_handed();
    return rc;
  }
  epoll_rearm(false);  // nothing left over from an earlier, failed restore
  inotify_reset();
  c.old_pid = in.u32();
  uint32_t count = in.u32();
  if (!in.ok()) return fail(msg, cap, Msg(c.line, sizeof c.line).s("fd section: truncated header"), EINVAL);
  int prev = -1;
  for (uint32_t k = 0; k < count; ++k) {
    FdRecord rec;
    char path[PATH_MAX];
    in.bytes(&rec, sizeof rec);
    in.str(path, sizeof path);
    if (!in.ok()) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("fd section: truncated at record ").u(k).s(" of ").u(count), EINVAL);
    }
    if (!record_ok(rec, prev, in.remaining())) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("fd section: malformed record for fd ").i(rec.fd), EINVAL);
    }
    prev = rec.fd;
    map_proc_self(path, c.old_pid);
    if (inject::fd_reserved(rec.fd)) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" ('").s(path)
          .s("') is held by the restart engine in the restored process"), EBUSY);
    }
    if (is_inherited(rec.fd)) {  // the skeleton places them above every saved fd: never expected
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" ('").s(path)
          .s("') is taken by a shared file description handed over by revive restart"), EBUSY);
    }
    int rc = restore_one(c, rec, path);
    if (rc != 0) return rc;
  }
  close_handed();
  if (int rc = locks_restore(c); rc != 0) return rc;
  if (in.remaining() != 0) return fail(msg, cap, Msg(c.line, sizeof c.line).s("fd section: ").u(in.remaining()).s(" trailing bytes"), EINVAL);
  if (int rc = inotify_rearm(c); rc != 0) return rc;
  epoll_rearm(true);
  return 0;
}

}  // namespace revive::plugins
