// fd plugin, checkpoint side: lists /proc/self/fd with getdents64 (opendir would malloc) and records each
// descriptor's kind, path, flags, offset, size and mtime.
#include <dirent.h>
#include <linux/kcmp.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "plugins/vpid/vpid.h"
#include "plugins/common/host_tag.h"
#include "plugins/common/msg.h"
#include "plugins/common/outside_files.h"
#include "plugins/common/proc_fds.h"
#include "plugins/common/section_io.h"
#include "plugins/fd/fd_record.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/plugins.h"

// The chan plugin's (chan_pipe.cpp, chan_connect.cpp); weak: null when it is not linked in (plugin tests).
extern "C" bool revive_chan_pipe_shared(uint64_t ino) __attribute__((weak));
extern "C" int revive_chan_takes(int fd) __attribute__((weak));

namespace revive::plugins {

// The flags open() can set again (F_GETFL also reports internal bits such as O_LARGEFILE/FMODE ones).
// O_ASYNC is left out: it needs F_SETOWN, which is not tracked.
const int kReopenFlags = O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_DIRECT | O_NOATIME | O_PATH;

namespace {

constexpr char kDeletedSuffix[] = " (deleted)";

bool has_prefix(const char* s, const char* p) { return strncmp(s, p, strlen(p)) == 0; }

FdKind classify(int fd, const struct stat& st, const char* path) {
  if (S_ISREG(st.st_mode)) {
    size_t n = strlen(path), k = sizeof kDeletedSuffix - 1;
    bool deleted = st.st_nlink == 0 && n > k && strcmp(path + n - k, kDeletedSuffix) == 0;
    return deleted ? FdKind::kDeleted : FdKind::kRegular;
  }
  if (S_ISDIR(st.st_mode)) return FdKind::kDirectory;
  if (S_ISFIFO(st.st_mode)) return has_prefix(path, "pipe:") ? FdKind::kPipe : FdKind::kFifo;
  if (S_ISSOCK(st.st_mode)) return FdKind::kSocket;
  if (S_ISCHR(st.st_mode)) return isatty(fd) ? FdKind::kTerminal : FdKind::kCharDev;
  if (S_ISBLK(st.st_mode)) return FdKind::kCharDev;  // a device node either way: reopened by path
  if (strcmp(path, "anon_inode:[eventfd]") == 0) return FdKind::kEventfd;
  if (strcmp(path, "anon_inode:[timerfd]") == 0) return FdKind::kTimerfd;
  if (strcmp(path, "anon_inode:[eventpoll]") == 0) return FdKind::kEpoll;
  if (strcmp(path, "anon_inode:[signalfd]") == 0) return FdKind::kSignalfd;
  if (strcmp(path, "anon_inode:inotify") == 0) return FdKind::kInotify;
  return FdKind::kOther;  // other anonymous inodes: fanotify, pidfd, io_uring, userfaultfd, perf, bpf...
}

// Copies a deleted file's contents into the section with pread (the descriptor's offset is untouched).
bool save_contents(Out& out, int fd, int64_t size) {
  char buf[8192];
  int64_t off = 0;
  while (off < size) {
    size_t want = static_cast<size_t>(size - off < (int64_t)sizeof buf ? size - off : (int64_t)sizeof buf);
    ssize_t n = pread(fd, buf, want, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (!out.bytes(buf, static_cast<size_t>(n))) return false;
    off += n;
  }
  return true;
}

// Descriptors saved so far in this checkpoint, to find dups (static: no allocation, one checkpoint thread).
struct Seen {
  int fd;
  dev_t dev;
  ino_t ino;
};
constexpr int kMaxFds = 4096;
Seen g_seen[kMaxFds];
int g_nseen;
pid_t g_self;  // getpid() once per checkpoint, for kcmp

// Which open file description a regular file descriptor is across processes (see share_keys).
struct ShareKey {
  uint32_t pid;
  int32_t fd;
};

// Every pipe end open here (listed before saving), to find pipes whose two ends are both ours.
struct PipeEnd {
  int fd;
  ino_t ino;
  int accmode;
};
PipeEnd g_pipes[kMaxFds];
int g_npipes;
char g_pipe_data[1 << 20];  // a pipe's buffered bytes (1 MiB = the default fs.pipe-max-size)

void list_pipes(const int* fds, int n) {
  g_npipes = 0;
  for (int k = 0; k < n; ++k) {
    struct stat st;
    if (fds[k] > 2 && fstat(fds[k], &st) == 0 && S_ISFIFO(st.st_mode))
      g_pipes[g_npipes++] = PipeEnd{fds[k], st.st_ino, fcntl(fds[k], F_GETFL) & O_ACCMODE};
  }
}

// The lowest fd holding the other end of fd's pipe, or -1 (not ours, or a pipe too large to buffer).
int find_pipe_peer(int fd, const struct stat& st, int accmode) {
  if (fd <= 2 || accmode == O_RDWR) return -1;
  int cap = fcntl(fd, F_GETPIPE_SZ);
  if (cap < 0 || cap > static_cast<int>(sizeof g_pipe_data)) return -1;
  for (int k = 0; k < g_npipes; ++k)
    if (g_pipes[k].ino == st.st_ino && g_pipes[k].accmode != accmode && g_pipes[k].accmode != O_RDWR) return g_pipes[k].fd;
  return -1;
}

// The earlier descriptor sharing fd's open file description (same offset and flags: dup, 2>&1,
// inherited), found with kcmp(KCMP_FILE); -1 if none or kcmp is unavailable.
int find_dup(int fd, const struct stat& st) {
  for (int k = 0; k < g_nseen; ++k) {
    if (g_seen[k].dev != st.st_dev || g_seen[k].ino != st.st_ino) continue;
    if (syscall(SYS_kcmp, g_self, g_self, KCMP_FILE, g_seen[k].fd, fd) == 0) return g_seen[k].fd;
  }
  return -1;
}

// The command name of process pid (kernel pid; 0: this one) into comm[32], "?" if unreadable.
void comm_of(uint32_t pid, char* comm) {
  char path[48];
  if (pid == 0) Msg(path, sizeof path).s("/proc/self/comm");
  else Msg(path, sizeof path).s("/proc/").u(pid).s("/comm");
  memcpy(comm, "?", 2);
  // A kernel pid: the raw call, which no virtual-pid wrapper translates (plugins/vpid).
  int cf = int(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (cf < 0) return;
  ssize_t n = read(cf, comm, 31);
  comm[n > 0 ? n : 0] = '\0';
  if (n > 0 && comm[n - 1] == '\n') comm[n - 1] = '\0';
  if (n <= 0) memcpy(comm, "?", 2);
  close(cf);
}

// The checkpoint fails (rc: -ENOTSUP) or is refused for now (-EAGAIN: taken again) because of fd, which
// is `what`; the message names the process, the fd and what it is. hint: name the stand-in option (a
// kind it applies to). Also fd_inotify.cpp's and fd_locks.cpp's.
}  // namespace

int refuse_fd(int fd, const char* what, int rc, bool hint) {
  char comm[32];
  comm_of(0, comm);
  char line[PATH_MAX + 400];
  Msg(line, sizeof line).s(rc == -EAGAIN ? "checkpoint refused for now: process " : "checkpoint refused: process ")
      .i(g_self).s(" (").s(comm).s(") fd ").i(fd).s(" is ").s(what)
      .s(rc == -EAGAIN || !hint ? "" : " (REVIVE_FD_UNSUPPORTED=stand-in: restore it as /dev/null instead)");
  inject::plugin_refusal(line);
  warn(line);
  return rc;
}

namespace {

// A socket's SocketState and the unread bytes that follow it (fd_socket.cpp).
alignas(8) char g_sock[sizeof(SocketState) + kSockDataMax];

// A socket the chan plugin does not rebuild is made again from its state; one that cannot be is refused
// now, unless the chan plugin's table is not this checkpoint's (a standalone checkpoint: it scans after
// us; then, as with REVIVE_FD_UNSUPPORTED=stand-in, a /dev/null stand-in at restore). 0 or -errno.
int socket_record(FdRecord& rec, int fd, const char** content) {
  const int takes = revive_chan_takes ? revive_chan_takes(fd) : -1;
  if (takes == 1) return 0;  // a placeholder at restore
  char why[160];
  auto* s = reinterpret_cast<SocketState*>(g_sock);
  int64_t n = socket_state(fd, s, g_sock + sizeof(SocketState), kSockDataMax, why, sizeof why);
  if (n >= 0) {
    *content = g_sock;
    rec.content_len = static_cast<int64_t>(sizeof(SocketState)) + n;
    return 0;
  }
  if (takes < 0 || g_fd_stand_ins) return 0;
  char what[200];
  Msg(what, sizeof what).s("a ").s(why).s(n == -EAGAIN ? "" : ", which revive cannot restore");
  return refuse_fd(fd, what, static_cast<int>(n));
}

uint64_t g_share_gen;  // the generation whose drain published our files; 0: none (no coordinator)
uint64_t g_save_gen;   // that generation, during fd_save (g_share_gen is taken once per drain)
char g_share_host[64];  // "<boot id>.<pid namespace>": kcmp and pids mean something on this kernel and namespace only

// State beyond the path of an fd that is not a dup, read now (the content follows the record; see
// fd_special.cpp): sets rec.content_len/peer_fd/size and *content. A kind whose state cannot be read is
// saved as kOther (a stand-in on restore). 0 or -errno.
int special_state(FdRecord& rec, int fd, const struct stat& st, int fl, char* payload, size_t cap,
                  const char** content) {
  auto kind = static_cast<FdKind>(rec.kind);
  if (kind == FdKind::kEventfd || kind == FdKind::kTimerfd || kind == FdKind::kSignalfd) {
    int64_t n = special_payload(fd, kind, payload, cap);
    if (n <= 0) {
      rec.kind = static_cast<uint32_t>(FdKind::kOther);
      return 0;
    }
    *content = payload;
    rec.content_len = n;
  } else if (kind == FdKind::kEpoll) {
    const EpollItem* items = nullptr;
    int n = epoll_items(fd, &items);
    if (n < 0) {
      rec.kind = static_cast<uint32_t>(FdKind::kOther);
      return 0;
    }
    *content = reinterpret_cast<const char*>(items);
    rec.content_len = static_cast<int64_t>(n) * static_cast<int64_t>(sizeof(EpollItem));
  } else if (kind == FdKind::kInotify) {
    char why[PATH_MAX + 200], shared[160];
    // Shared with other processes (a share key, a coordinator): the holders tell the owner the paths of
    // the watches they added (fd_inotify.cpp).
    const bool share = rec.share_pid != 0 && g_save_gen != 0 && g_share_host[0];
    if (share)
      Msg(shared, sizeof shared).s("gen.").u(g_save_gen).s(".inow.").s(g_share_host).s(".").u(rec.share_pid).s(".")
          .i(rec.share_fd).s(".");
    const bool owner = rec.share_pid == 0 || (rec.share_pid == static_cast<uint32_t>(g_self) && rec.share_fd == fd);
    int64_t n = inotify_state(fd, content, why, sizeof why, share ? shared : nullptr, owner);
    if (n >= 0) {
      rec.content_len = n;
    } else if (g_fd_stand_ins && n != -EAGAIN) {
      rec.kind = static_cast<uint32_t>(FdKind::kOther);  // REVIVE_FD_UNSUPPORTED=stand-in
    } else {
      return refuse_fd(fd, why, static_cast<int>(n), n != -EAGAIN);
    }
  } else if (kind == FdKind::kSocket && fd > 2) {  // 0/1/2 stay what `revive restart` is given
    return socket_record(rec, fd, content);
  } else if (kind == FdKind::kTerminal && st.st_rdev == makedev(5, 2) && revive_chan_takes && !g_fd_stand_ins &&
             revive_chan_takes(fd) == 0) {
    // A pseudo-terminal master (/dev/ptmx) is the chan plugin's to rebuild (or widow) with its pair;
    // reopened by path it would be a fresh master of an unrelated pair, whose reads block for ever.
    return refuse_fd(fd, "a pseudo-terminal master that revive cannot rebuild (its channel table is full)", -ENOTSUP);
  } else if (kind == FdKind::kPipe) {
    rec.peer_fd = find_pipe_peer(fd, st, fl & O_ACCMODE);
    rec.size = rec.peer_fd >= 0 ? fcntl(fd, F_GETPIPE_SZ) : 0;
    // Second end: carries the bytes in the pipe, unless another process holds the pipe too: then the
    // chan plugin drains and rebuilds it (it is not local after all), and we must not touch its bytes.
    if (rec.peer_fd >= 0 && rec.peer_fd < fd && !(revive_chan_pipe_shared && revive_chan_pipe_shared(uint64_t(st.st_ino)))) {
      bool reader = (fl & O_ACCMODE) == O_RDONLY;
      int64_t n = pipe_peek(reader ? fd : rec.peer_fd, reader ? rec.peer_fd : fd, g_pipe_data, sizeof g_pipe_data);
      if (n < 0) return static_cast<int>(n);
      *content = g_pipe_data;
      rec.content_len = n;
    }
  }
  return 0;
}

// /proc/<pid>/... of another process as the program names it (virtual pids, plugins/vpid): restore
// reopens it through the open() wrapper, which finds that process's kernel pid then. Our own stays as
// the kernel shows it: restore maps it to /proc/self (the section records our kernel pid). A
// /task/<tid> after either is a thread's kernel id too: the program's, or a restart would ask the
// wrapper for a thread named by an id of the previous incarnation (a checkpoint that lands just as
// open() of /proc/self/task/T/stat returns keeps that descriptor: "cannot be reopened", seen in CI).
void virtual_proc_path(char* path, size_t cap) {
  if (!vpid::active() || strncmp(path, "/proc/", 6) != 0) return;
  // Parses a number at *q (advancing it); -1 if none or not followed by '/' or the end.
  auto number = [](const char*& q) -> long {
    const char* start = q;
    long v = 0;
    while (*q >= '0' && *q <= '9' && v < 0x7fffffff) v = v * 10 + (*q++ - '0');
    return q == start || (*q && *q != '/') ? -1 : v;
  };
  const char* q = path + 6;
  const long pid = number(q);
  if (pid < 0) return;
  long tid = -1;
  const char* rest = q;
  if (strncmp(q, "/task/", 6) == 0) {
    const char* t = q + 6;
    tid = number(t);
    if (tid >= 0) rest = t;
  }
  if (pid == g_self && tid < 0) return;
  static char out[PATH_MAX];  // off the checkpoint thread's stack (only it runs save)
  Msg m(out, sizeof out);
  m.s("/proc/").i(pid == g_self ? pid_t(pid) : vpid::to_virt(pid_t(pid)));
  if (tid >= 0) m.s("/task/").i(vpid::to_virt(pid_t(tid)));
  m.s(rest);
  if (m.size() + 1 >= sizeof out || m.size() + 1 > cap) return;
  memcpy(path, out, m.size() + 1);
}

// Without the coordinator's list (a standalone checkpoint): the lowest of this process's descriptors of
// the deleted inode (dev, ino) stores its contents, the others name it. Descriptors come in ascending
// order, so the first one seen is the lowest.
DeletedHolder local_holder(int fd, const struct stat& st) {
  for (int k = 0; k < g_nseen; ++k)
    if (g_seen[k].dev == st.st_dev && g_seen[k].ino == st.st_ino) return DeletedHolder{uint32_t(g_self), g_seen[k].fd};
  return DeletedHolder{uint32_t(g_self), fd};
}

// A process that maps a deleted file shared in a way its descriptors cannot follow (deleted_holders):
// pid 0 if none.
struct SplitMapper {
  uint32_t pid;
  uint64_t offset, len;  // the file range it maps
};

// A deleted file's descriptor that would come back as a copy apart from a shared mapping of the file
// (issue 13): the restart hands a mapped object only to descriptors of a file that a holder maps whole at
// offset 0 (kStoredInShm); a mapping in part, or by a process holding no descriptor of the file, is
// restored as an object of its own. Nothing is silently substituted: the checkpoint fails, naming the
// holder, its fd, the file and the mapping process.
int refuse_split(int fd, const char* path, const struct stat& st, const SplitMapper& m) {
  static char what[PATH_MAX + 300];  // off the checkpoint thread's stack (only it runs save)
  char comm[32];
  comm_of(m.pid == uint32_t(g_self) ? 0 : m.pid, comm);
  Msg msg(what, sizeof what);
  msg.s("the deleted file '").s(path).s("' (").i(st.st_size).s(" bytes), which ");
  if (m.pid == uint32_t(g_self)) msg.s("this process");
  else msg.s("process ").u(m.pid).s(" (").s(comm).s(")");
  msg.s(" maps shared (file offset ").u(m.offset).s(", ").u(m.len).s(" bytes) ")
      .s(m.pid == uint32_t(g_self) ? "only in part" : "while no process both maps it whole and holds it open")
      .s(": revive would restore this descriptor as a copy apart from that mapping");
  return refuse_fd(fd, what, -ENOTSUP, false);
}

// A descriptor that could not even be looked at (it went away under us, or /proc refused): the checkpoint
// fails through refuse_fd, naming the process, the fd, the step and the errno, never a bare "save failed".
int lost_fd(int fd, const char* step, int e) {
  char what[200];
  Msg(what, sizeof what).s("not readable (").s(step).s(": ").err(e).s(")");
  return refuse_fd(fd, what, -e, false);
}

// Saves one descriptor. Returns 0, or -errno with a warning on stderr naming it (save has no message
// channel of its own). mapper: for a deleted file, a holder in another process that maps it shared
// whole (deleted_holders), else pid 0; split: a process mapping it otherwise (deleted_holders), else pid 0.
int save_one(Out& out, int fd, ShareKey share, DeletedHolder holder, DeletedHolder mapper, SplitMapper split) {
  char link[32];
  Msg(link, sizeof link).s("/proc/self/fd/").i(fd);
  char path[PATH_MAX];
  ssize_t plen = readlink(link, path, sizeof path - 1);
  if (plen < 0) return lost_fd(fd, "readlink of /proc/self/fd failed (listed, then gone)", errno);
  path[plen] = '\0';
  // The virtual pid may have another number of digits than the kernel's: the stored length is the
  // rewritten path's (a /proc/123/stat named /proc/32597/stat was once stored cut to 14 bytes).
  if (const char* view = vpid::proc_view_path(path)) {
    // A /proc stat/status file read with the program's ids (a memfd copy, vpid_procview.cpp): recorded
    // as that /proc file (already in the program's ids), so a restart opens it again, fresh.
    const size_t n = strlen(view), k = sizeof kDeletedSuffix - 1;
    const size_t keep = n > k && strcmp(view + n - k, kDeletedSuffix) == 0 ? n - k : n;
    memmove(path, view, keep);
    path[keep] = '\0';
  } else {
    virtual_proc_path(path, sizeof path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return lost_fd(fd, "fstat failed", errno);
  int fl = fcntl(fd, F_GETFL);
  int fdf = fcntl(fd, F_GETFD);
  if (fl < 0 || fdf < 0) return lost_fd(fd, "fcntl failed", errno);

  FdRecord rec{};
  rec.fd = fd;
  FdKind kind = classify(fd, st, path);
  rec.kind = static_cast<uint32_t>(kind);
  rec.flags = fl & kReopenFlags;
  rec.fd_flags = fdf & FD_CLOEXEC;
  if (kind == FdKind::kRegular && (fl & O_ACCMODE) != O_RDONLY && outside_file(st.st_dev, st.st_ino))
    rec.fd_flags |= kFdOutside;
  off_t o = (fl & O_PATH) ? -1 : lseek(fd, 0, SEEK_CUR);
  rec.offset = o < 0 ? -1 : o;
  rec.size = st.st_size;
  rec.mtime_sec = st.st_mtim.tv_sec;
  rec.mtime_nsec = st.st_mtim.tv_nsec;
  rec.mode = st.st_mode;
  rec.dup_of = find_dup(fd, st);
  rec.peer_fd = -1;
  rec.share_fd = -1;
  if ((kind == FdKind::kRegular || kind == FdKind::kDeleted || kind == FdKind::kEventfd || kind == FdKind::kTimerfd ||
       kind == FdKind::kSignalfd || kind == FdKind::kEpoll || kind == FdKind::kInotify) &&
      rec.dup_of < 0 && share.pid != 0) {
    rec.share_pid = share.pid;
    rec.share_fd = share.fd;
  }
  if (kind == FdKind::kDeleted && holder.pid == 0) holder = local_holder(fd, st);
  if (g_nseen < kMaxFds) g_seen[g_nseen++] = Seen{fd, st.st_dev, st.st_ino};
  char payload[64];
  const char* content = nullptr;
  if (rec.dup_of < 0) {
    int rc = special_state(rec, fd, st, fl, payload, sizeof payload, &content);
    if (rc != 0) return rc;
  }
  uint64_t shm_at = 0;
  MapLine part{};
  if (kind == FdKind::kDeleted && rec.dup_of < 0) shm_at = shared_mapping_of(st, &part);
  if (kind == FdKind::kDeleted && rec.dup_of < 0 && shm_at == 0 && mapper.pid == 0) {
    // Mapped here in part (also without a coordinator: a standalone checkpoint), or elsewhere.
    if (part.end != 0) split = SplitMapper{uint32_t(g_self), part.offset, part.end - part.start};
    if (split.pid != 0) return refuse_split(fd, path, st, split);
  }
  if (shm_at != 0) {
    // The restarter hands over the object; the share key stays: a description inherited by a process
    // that holds the file without mapping it is handed down once by `revive restart` (tree_deleted.cpp).
    rec.stored = kStoredInShm;
    rec.content_len = sizeof shm_at;
    content = reinterpret_cast<const char*>(&shm_at);
  } else if (kind == FdKind::kDeleted && rec.dup_of < 0 && mapper.pid != 0) {
    // Another process maps this deleted file shared: it comes back as that process's shared memory object
    // (its record is kStoredInShm), and this descriptor must name that same object, not a copy (issue 13).
    // The record names the mapping holder; `revive restart` hands the object down to this descriptor
    // (tree_deleted.cpp), and a restart without that holder's image fails naming it (fd_restore.cpp).
    rec.stored = kStoredByHolder;
    rec.content_len = sizeof mapper;
    content = reinterpret_cast<const char*>(&mapper);
  } else if (kind == FdKind::kDeleted && rec.dup_of < 0 &&
             !(holder.pid == uint32_t(g_self) && holder.fd == fd)) {
    // Another descriptor of this inode (here or in another process) stores its contents: one inode at
    // restart, so a write through one is seen through the others, as before the checkpoint.
    rec.stored = kStoredByHolder;
    rec.content_len = sizeof holder;
    content = reinterpret_cast<const char*>(&holder);
  } else if (kind == FdKind::kDeleted && rec.dup_of < 0) {
    if (st.st_size > g_max_deleted_bytes) {
      char line[PATH_MAX + 160];
      Msg(line, sizeof line).s("checkpoint refused: fd ").i(fd).s(" is the deleted file '").s(path).s("' of ")
          .i(st.st_size).s(" bytes; deleted-but-open files are saved only up to ").i(g_max_deleted_bytes)
          .s(" bytes (REVIVE_FD_DELETED_MAX_MB)");
      inject::plugin_refusal(line);
      warn(line);
      return -EFBIG;
    }
    rec.content_len = st.st_size;
  }
  if (static_cast<FdKind>(rec.kind) == FdKind::kOther && rec.dup_of < 0 && !g_fd_stand_ins) {
    // Nothing is silently substituted: the checkpoint fails now, naming what, rather than the program's
    // data after a restart (it would read EOF from /dev/null where its inotify events were).
    char what[PATH_MAX + 80];
    // A pidfd is mostly held for a moment (pidfd_open, pidfd_send_signal or poll, close): refused for
    // now, so the coordinator takes the checkpoint again a little later; one held for good ends the
    // attempts with this message.
    const bool brief = strcmp(path, "anon_inode:[pidfd]") == 0;
    Msg(what, sizeof what).s("'").s(path).s("', a kind of descriptor revive cannot restore");
    return refuse_fd(fd, what, brief ? -EAGAIN : -ENOTSUP);
  }
  out.bytes(&rec, sizeof rec);
  out.str(path, strlen(path));
  if (content) {
    out.bytes(content, static_cast<size_t>(rec.content_len));
  } else if (rec.content_len > 0 && !save_contents(out, fd, rec.content_len)) {
    char line[PATH_MAX + 80];
    Msg(line, sizeof line).s("checkpoint failed: fd ").i(fd).s(": cannot read deleted file '").s(path).s("'");
    warn(line);
    return -EIO;
  }
  return out.ok() ? 0 : -ENOMEM;
}

// The parent of pid from /proc/<pid>/stat ("pid (comm) S ppid ..."; comm may hold ')'), 0 if unknown.
uint32_t parent_of(uint32_t pid) {
  char path[48], buf[512];
  Msg(path, sizeof path).s("/proc/").u(pid).s("/stat");
  // Kernel pids: raw calls, which no virtual-pid wrapper translates (plugins/vpid).
  int fd = int(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2] || p[3] != ' ') return 0;
  uint32_t v = 0;
  for (p += 4; *p >= '0' && *p <= '9'; ++p) v = v * 10 + uint32_t(*p - '0');
  return v;
}

// Open file descriptions shared with other processes (issue: a log opened once and inherited by a whole
// tree must keep ONE offset after restart). For each regular file descriptor, the topmost process among
// us and our ancestors that holds the same description (kcmp KCMP_FILE compares the kernel's struct
// file, not the path) and its lowest fd for it. Every process sharing a description that an ancestor
// (or one of them) holds computes the same pair, whichever process saves first: all are suspended.
// Siblings sharing a description that no common ancestor holds any more get pairs of their own.
ShareKey g_share[kMaxFds];  // by position in fd_save's list
struct FileId {
  dev_t dev;
  ino_t ino;
};
FileId g_ids[kMaxFds];  // our regular files, by position
int g_anc_fds[kMaxFds];
FileId g_anc_ids[kMaxFds];
constexpr int kMaxAncestors = 64;

// An eventfd, a timerfd, a signalfd, an epoll or an inotify instance (its /proc/self/fd link): its
// description is shared across fork like a file's.
bool is_shared_anon(int fd) {
  char link[64], target[32];
  Msg(link, sizeof link).s("/proc/self/fd/").i(fd);
  ssize_t m = readlink(link, target, sizeof target - 1);
  if (m <= 0) return false;
  target[m] = 0;
  return strcmp(target, "anon_inode:[eventfd]") == 0 || strcmp(target, "anon_inode:[timerfd]") == 0 ||
         strcmp(target, "anon_inode:[signalfd]") == 0 || strcmp(target, "anon_inode:[eventpoll]") == 0 ||
         strcmp(target, "anon_inode:inotify") == 0;
}

void share_keys(const int* fds, int n) {
  bool any = false;
  for (int k = 0; k < n; ++k) {
    g_share[k] = ShareKey{0, -1};
    struct stat st;
    if (inject::fd_reserved(fds[k]) || fstat(fds[k], &st) != 0) continue;
    // Regular files, eventfds, timerfds, signalfds, epoll and inotify instances (anonymous inodes: no file type;
    // every anonymous-inode descriptor has the same inode, so kcmp alone tells which are one description).
    if (!S_ISREG(st.st_mode) && !((st.st_mode & S_IFMT) == 0 && is_shared_anon(fds[k]))) continue;
    int fl = fcntl(fds[k], F_GETFL);
    if (fl < 0 || (fl & O_PATH)) continue;
    g_share[k] = ShareKey{static_cast<uint32_t>(g_self), fds[k]};
    g_ids[k] = FileId{st.st_dev, st.st_ino};
    any = true;
  }
  if (!any) return;
  uint32_t anc[kMaxAncestors];
  int na = 0;
  for (uint32_t p = static_cast<uint32_t>(syscall(SYS_getppid)); p > 1 && na < kMaxAncestors; p = parent_of(p))
    anc[na++] = p;
  // Farthest first: the first holder found is the topmost. kcmp only where the file (dev, inode) is the
  // same: a kcmp per pair of descriptors cost ~70 ms for 1000 files (bench/plugins).
  for (int a = na - 1; a >= 0; --a) {
    int m = list_fds(anc[a], g_anc_fds, kMaxFds);
    int files = 0;
    for (int j = 0; j < m; ++j) {
      char path[64];
      Msg(path, sizeof path).s("/proc/").u(anc[a]).s("/fd/").i(g_anc_fds[j]);
      struct stat st;
      // Gone, not ours to look at, or neither a file nor an anonymous inode (an eventfd's: kcmp below).
      if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0 || !(S_ISREG(st.st_mode) || (st.st_mode & S_IFMT) == 0))
        continue;
      g_anc_fds[files] = g_anc_fds[j];
      g_anc_ids[files++] = FileId{st.st_dev, st.st_ino};
    }
    for (int k = 0; k < n; ++k) {
      if (g_share[k].pid != static_cast<uint32_t>(g_self)) continue;  // not a file, or a higher holder found
      for (int j = 0; j < files; ++j) {
        if (g_anc_ids[j].dev != g_ids[k].dev || g_anc_ids[j].ino != g_ids[k].ino) continue;
        long r = syscall(SYS_kcmp, g_self, anc[a], KCMP_FILE, fds[k], g_anc_fds[j]);
        if (r == 0) {
          g_share[k] = ShareKey{anc[a], g_anc_fds[j]};
          break;
        }
        if (r < 0 && errno == ENOSYS) return;  // no kcmp: every description stays this process's own
      }
    }
  }
}

// Descriptions shared by processes none of which is an ancestor of the others (siblings whose parent
// closed its copy, cousins): the ancestor walk above cannot see them, so every process of the computation
// tells the coordinator, in the drain phase (every process suspended), which regular files it holds:
// one key per descriptor, "gen.<G>.fdsh.<host>.<dev>.<ino>.<offset>.<flags>.<pid>.<fd>" (a description's
// offset and status flags are the same for all its holders, so independent opens of one file mostly get
// prefixes of their own). In the write phase each process walks the keys of its file in the coordinator's
// order and takes the first holder whose descriptor kcmp finds identical to its own: every holder of one
// description stops at the same entry, so all of them save the same share key and the restart opens the
// file once for all of them (proctree's PlanShared). Keys under "gen.<G>." are dropped by the coordinator
// when the attempt ends.

void share_host() {
  if (g_share_host[0]) return;
  char ns[48] = "";
  ssize_t m = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  uint64_t nsino = 0;
  for (ssize_t i = 0; i < m; ++i)
    if (ns[i] >= '0' && ns[i] <= '9') nsino = nsino * 10 + uint64_t(ns[i] - '0');
  Msg(g_share_host, sizeof g_share_host).s(host_tag()).s(".").u(nsino);
}

// The key prefix of fd's description, or false when fd is not a regular file (or an eventfd, timerfd,
// signalfd, epoll or inotify: held by siblings whose parent closed it, since 2026-11-29) we would share. Every one of those
// has the one anonymous inode: their keys differ by holder only, and kcmp tells which are one description.
bool share_prefix(int fd, uint64_t gen, char* out, size_t cap, struct stat* stp = nullptr) {
  if (inject::fd_reserved(fd)) return false;
  struct stat own;
  struct stat& st = stp ? *stp : own;
  if (fstat(fd, &st) != 0) return false;
  const bool anon = (st.st_mode & S_IFMT) == 0 && is_shared_anon(fd);
  if (!S_ISREG(st.st_mode) && !anon) return false;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_PATH)) return false;
  off_t pos = anon ? 0 : lseek(fd, 0, SEEK_CUR);
  Msg(out, cap).s("gen.").u(gen).s(".fdsh.").s(g_share_host).s(".").u(uint64_t(st.st_dev)).s(".")
      .u(uint64_t(st.st_ino)).s(".").i(int64_t(pos)).s(".").u(uint32_t(fl) & uint32_t(kReopenFlags)).s(".");
  return true;
}

// Every shared mapping of a deleted file here, whether or not this process holds the file open:
// "gen.<G>.fdsh.<host>.<dev>.<ino>.-1.0.<pid>.<n>" = "M<offset>.<length>" (offset -1: no descriptor's
// key has it). The holders of the file in other processes find it (deleted_holders): a mapping by a
// process without a descriptor, or of part of the file, is not the object their descriptors get back, so
// they refuse the checkpoint instead of coming back as a copy (issue 13). Shared anonymous memory and
// SysV segments (no descriptor can hold them) are left out; at most 256 per process. False: coordinator lost.
bool publish_deleted_maps(uint64_t gen, uint64_t self) {
  struct Pub {
    uint64_t gen, self;
    int n;
    bool ok;
  } pub{gen, self, 0, true};
  each_map(
      [](const MapLine& m, void* a) {
        auto* p = static_cast<Pub*>(a);
        const size_t n = strlen(m.path), k = sizeof kDeletedSuffix - 1;
        if (!m.shared || m.path[0] != '/' || n <= k || strcmp(m.path + n - k, kDeletedSuffix) != 0 ||
            has_prefix(m.path, "/SYSV") || has_prefix(m.path, "/dev/zero"))
          return true;
        char key[256], val[48];
        Msg(key, sizeof key).s("gen.").u(p->gen).s(".fdsh.").s(g_share_host).s(".")
            .u(uint64_t(makedev(m.dev_major, m.dev_minor))).s(".").u(m.ino).s(".-1.0.").u(p->self).s(".").i(p->n);
        Msg(val, sizeof val).s("M").u(m.offset).s(".").u(m.end - m.start);
        p->ok = inject::coord_publish(key, val);
        return p->ok && ++p->n < 256;
      },
      &pub);
  return pub.ok;
}

}  // namespace

int fd_drain(uint64_t gen, char*, size_t) {
  g_share_gen = 0;
  if (!inject::coord_configured()) return 0;
  static int fds[kMaxFds];
  int n = list_fds(0, fds, kMaxFds);
  if (n <= 0) return 0;  // save says why
  share_host();
  const uint64_t self = uint64_t(syscall(SYS_getpid));
  char key[256];
  for (int k = 0; k < n; ++k) {
    struct stat st;
    if (!share_prefix(fds[k], gen, key, sizeof key, &st)) continue;
    char* end = key + strlen(key);
    Msg(end, sizeof key - size_t(end - key)).u(self).s(".").i(fds[k]);
    // "m": a deleted file this process maps shared, which goes on as shared memory (kStoredInShm): its
    // holders then keep the contents each (deleted_holders).
    const char* val = S_ISREG(st.st_mode) && st.st_nlink == 0 && shared_mapping_of(st) != 0 ? "m" : "";
    if (!inject::coord_publish(key, val)) return 0;  // coordinator lost: the checkpoint fails anyway
  }
  if (!publish_deleted_maps(gen, self)) return 0;
  g_share_gen = gen;
  return 0;
}

namespace {

// After share_keys: the first published holder of each regular file's description (see above).
void share_keys_published(const int* fds, int n, uint64_t gen) {
  if (gen == 0) return;
  char prefix[256], at[256], val[8];
  for (int k = 0; k < n; ++k) {
    if (g_share[k].pid == 0 || !share_prefix(fds[k], gen, prefix, sizeof prefix)) continue;
    const size_t pn = strlen(prefix);
    memcpy(at, prefix, pn + 1);
    // Bounded: holders of other descriptions with the same offset and flags come first at most this often.
    for (int step = 0; step < 4096; ++step) {
      int r = inject::coord_next(prefix, at, 10000, at, sizeof at, val, sizeof val);
      if (r != 1) break;
      uint64_t pid = 0, fd = 0;
      const char* p = at + pn;
      for (; *p >= '0' && *p <= '9'; ++p) pid = pid * 10 + uint64_t(*p - '0');
      if (*p++ != '.') continue;
      for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + uint64_t(*p - '0');
      if (*p || pid == 0 || pid > 0x7fffffff || fd > 0x7fffffff) continue;
      if (syscall(SYS_kcmp, g_self, pid_t(pid), KCMP_FILE, fds[k], int(fd)) == 0) {
        g_share[k] = ShareKey{uint32_t(pid), int(fd)};
        break;
      }
    }
  }
}

// A deleted file held by several processes (a temporary file unlinked and then inherited across fork) or
// through several descriptions (opened twice, or again through /proc/PID/fd/N) is ONE inode: its contents
// are stored once and the restart recreates one inode for all its descriptors (docs/process-trees.md).
// Every holder walks every published key of the inode ("gen.<G>.fdsh.<host>.<dev>.<ino>.", whatever the
// offset and flags) in the coordinator's order; the first key's process, with its lowest fd among the
// keys, stores the contents. Every walker sees the same keys (all were published in drain), so all elect
// the same descriptor. A holder that maps the file shared ("m") leaves it to the shared memory path
// (kStoredInShm): that holder is then noted in g_mapper, and the descriptors of the processes that do not
// map it name it as their holder (kStoredByHolder): the restart opens them on the mapped object. {0, -1}: not elected here (no coordinator:
// local_holder decides in save_one) / no mapper.
DeletedHolder g_holder[kMaxFds];  // by position in fd_save's list
DeletedHolder g_mapper[kMaxFds];
// A process mapping the file shared ("M" keys, publish_deleted_maps) when no holder maps it whole: the
// descriptor would come back apart from that mapping, and save_one refuses it. The first such key wins.
SplitMapper g_split[kMaxFds];

// "M<offset>.<length>" into *m; false if val is not a mapping's value.
bool parse_mapping(const char* val, uint32_t pid, SplitMapper* m) {
  if (val[0] != 'M') return false;
  *m = SplitMapper{pid, 0, 0};
  const char* p = val + 1;
  for (; *p >= '0' && *p <= '9'; ++p) m->offset = m->offset * 10 + uint64_t(*p - '0');
  if (*p == '.')
    for (++p; *p >= '0' && *p <= '9'; ++p) m->len = m->len * 10 + uint64_t(*p - '0');
  return true;
}

void deleted_holders(const int* fds, int n, uint64_t gen) {
  for (int k = 0; k < n; ++k) {
    g_holder[k] = g_mapper[k] = DeletedHolder{0, -1};
    g_split[k] = SplitMapper{0, 0, 0};
  }
  if (gen == 0) return;
  char prefix[256], at[256], val[48];
  for (int k = 0; k < n; ++k) {
    struct stat st;
    if (inject::fd_reserved(fds[k]) || fstat(fds[k], &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0) continue;
    Msg(prefix, sizeof prefix).s("gen.").u(gen).s(".fdsh.").s(g_share_host).s(".").u(uint64_t(st.st_dev)).s(".")
        .u(uint64_t(st.st_ino)).s(".");
    memcpy(at, prefix, strlen(prefix) + 1);
    DeletedHolder h{0, -1}, m{0, -1};
    SplitMapper split{0, 0, 0};
    for (int step = 0; step < 4096 && m.pid == 0; ++step) {
      if (inject::coord_next(prefix, at, 10000, at, sizeof at, val, sizeof val) != 1) break;
      // "<offset>.<flags>.<pid>.<fd>": the last two fields.
      char* dot_fd = strrchr(at, '.');
      if (!dot_fd) continue;
      *dot_fd = 0;
      char* dot_pid = strrchr(at, '.');
      *dot_fd = '.';
      if (!dot_pid) continue;
      uint64_t pid = 0, fd = 0;
      const char* p = dot_pid + 1;
      for (; *p >= '0' && *p <= '9'; ++p) pid = pid * 10 + uint64_t(*p - '0');
      if (*p++ != '.') continue;
      for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + uint64_t(*p - '0');
      if (*p || pid == 0 || pid > 0x7fffffff || fd > 0x7fffffff) continue;
      if (val[0] == 'M') {
        if (split.pid == 0) parse_mapping(val, uint32_t(pid), &split);
      } else if (val[0] == 'm') m = DeletedHolder{uint32_t(pid), int32_t(fd)};
      else if (h.pid == 0) h = DeletedHolder{uint32_t(pid), int32_t(fd)};
      else if (uint32_t(pid) == h.pid && int32_t(fd) < h.fd) h.fd = int32_t(fd);
    }
    // This process's own mapping (kStoredInShm, save_one) covers its descriptors: no refusal for them.
    if (m.pid == 0) g_holder[k] = h, g_split[k] = split;
    else if (m.pid != uint32_t(g_self)) g_mapper[k] = m;
  }
}

}  // namespace

const char* fd_kind_name(uint32_t kind) {
  switch (static_cast<FdKind>(kind)) {
    case FdKind::kRegular: return "regular file";
    case FdKind::kDeleted: return "deleted file";
    case FdKind::kDirectory: return "directory";
    case FdKind::kCharDev: return "character device";
    case FdKind::kTerminal: return "terminal";
    case FdKind::kPipe: return "pipe";
    case FdKind::kSocket: return "socket";
    case FdKind::kFifo: return "fifo";
    case FdKind::kOther: return "other";
    case FdKind::kEventfd: return "eventfd";
    case FdKind::kTimerfd: return "timerfd";
    case FdKind::kEpoll: return "epoll";
    case FdKind::kSignalfd: return "signalfd";
    case FdKind::kInotify: return "inotify";
  }
  return "unknown";
}

int fd_save(inject::SectionWriter& w) {
  // No allocation allowed here, and the checkpoint thread's stack may be small: static tables (only the
  // checkpoint thread ever runs save).
  static int fds[kMaxFds];
  g_nseen = 0;
  g_self = static_cast<pid_t>(syscall(SYS_getpid));
  int n = list_fds(0, fds, kMaxFds);
  if (n < 0) {
    warn(n == -EMFILE ? "checkpoint refused: more than 4096 open descriptors" : "checkpoint failed: cannot list /proc/self/fd");
    return n;
  }
  list_pipes(fds, n);
  share_keys(fds, n);
  const uint64_t gen = g_share_gen;
  g_share_gen = 0;  // once per drain
  g_save_gen = gen;
  share_keys_published(fds, n, gen);
  deleted_holders(fds, n, gen);
  uint32_t count = 0;
  for (int k = 0; k < n; ++k) count += inject::fd_reserved(fds[k]) ? 0 : 1;
  Out out(w);
  out.tag(kFdTag);
  out.u32(static_cast<uint32_t>(g_self));  // to map /proc/<pid>/... to /proc/self/... on restore
  out.u32(count);
  for (int k = 0; k < n; ++k) {
    if (inject::fd_reserved(fds[k])) continue;
    int rc = save_one(out, fds[k], g_share[k], g_holder[k], g_mapper[k], g_split[k]);
    if (rc != 0) return rc;
  }
  if (int rc = locks_save(out, fds, n); rc != 0) return rc;
  return out.ok() ? 0 : -ENOMEM;
}

pid_t fd_saved_self() { return g_self; }

}  // namespace revive::plugins
