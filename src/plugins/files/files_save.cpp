// files plugin, checkpoint side: the contents of every regular file this process has open for writing
// (and, under node-local directories, open at all), then, in the launch root only, files under node-local
// directories that no process has open (a compiler's temporary between two passes). Runs on the
// checkpoint thread with user threads suspended: no allocation, static tables.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/file_locks.h"
#include "plugins/common/msg.h"
#include "plugins/common/outside_files.h"
#include "plugins/common/proc_fds.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/files_pre.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

constexpr int kMaxFds = 4096;

struct FileId {
  dev_t dev;
  ino_t ino;
};
FileId g_saved[kMaxFds];
int g_nsaved;
FileId g_warned[256];  // files named in a too-large warning (warned once per process)
int g_nwarned;

bool has_prefix(const char* s, const char* p) { return strncmp(s, p, strlen(p)) == 0; }

bool ends_with(const char* s, const char* t) {
  size_t n = strlen(s), k = strlen(t);
  return n >= k && strcmp(s + n - k, t) == 0;
}

// The parent directory's permission bits (0700 if it cannot be read).
uint32_t parent_mode(const char* path) {
  char dir[PATH_MAX];
  size_t n = strlen(path);
  if (n >= sizeof dir) return 0700;
  memcpy(dir, path, n + 1);
  char* slash = strrchr(dir, '/');
  if (!slash || slash == dir) return 0755;
  *slash = '\0';
  struct stat st;
  return stat(dir, &st) == 0 ? (st.st_mode & 07777) : 0700;
}

int save_fd(Out& out, int fd) {
  char link[32], path[PATH_MAX];
  Msg(link, sizeof link).s("/proc/self/fd/").i(fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || path[0] != '/') return 0;
  // Deleted-but-open files are the fd plugin's (it recreates them unlinked); kernel files are generated.
  if (st.st_nlink == 0 || ends_with(path, " (deleted)") || has_prefix(path, "/proc/") || has_prefix(path, "/sys/"))
    return 0;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_PATH)) return 0;
  bool writing = (fl & O_ACCMODE) != O_RDONLY;
  // A file shared with writers outside the computation: putting its checkpoint contents back would
  // erase what they wrote since (outside_files.h).
  if (writing && outside_file(st.st_dev, st.st_ino)) return 0;
  FileOrigin origin;
  if (writing && g_files.written) origin = FileOrigin::kWritten;
  else if (files_local(path)) origin = FileOrigin::kLocal;
  else return 0;  // a read-only input: the fd plugin checks it at restore
  if (st.st_size > g_files.max_bytes) {
    files_too_large(path, st.st_dev, st.st_ino, st.st_size);
    return 0;
  }
  if (!files_first(st.st_dev, st.st_ino)) return 0;
  // A write-only descriptor cannot be read: a fresh read-only description of the same inode through
  // /proc (does not disturb the program's offset or flags).
  int rfd = fd;
  // Closing that description would drop every POSIX lock this process holds on the file (POSIX: any
  // close of the file does): the ones set through fd are taken again after it.
  LockRecord held[32];
  char why[200];
  const int nheld = (fl & O_ACCMODE) == O_WRONLY ? file_locks_of(fd, held, 32, why, sizeof why) : 0;
  if ((fl & O_ACCMODE) == O_WRONLY && (rfd = open(link, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
    int e = errno;
    char line[PATH_MAX + 120];
    warn(Msg(line, sizeof line).s("checkpoint failed: fd ").i(fd).s(": cannot read '").s(path)
        .s("' to save its contents: ").err(e).s(" (REVIVE_FILES=none saves no contents)").c_str());
    return -e;
  }
  // With a birth time the entry carries the inode's identity: the restore then finds it again under the
  // name the stopped run renamed it to after the checkpoint (files_renamed.cpp).
  struct statx sx;
  FileIdentity id{};
  if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME)) {
    id = FileIdentity{uint64_t(makedev(sx.stx_dev_major, sx.stx_dev_minor)), sx.stx_ino, sx.stx_btime.tv_sec,
                      sx.stx_btime.tv_nsec, 0};
    origin = origin == FileOrigin::kWritten ? FileOrigin::kWrittenId : FileOrigin::kLocalId;
  }
  int rc = files_put(out, origin, rfd, path, st.st_size, st.st_mode & 07777, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                     id.ino ? &id : nullptr);
  if (rfd != fd) {
    close(rfd);
    for (int k = 0; k < nheld; ++k)
      if (held[k].kind == kPosix && file_lock_take(held[k]) != 0) {
        char line[PATH_MAX + 160];
        warn(Msg(line, sizeof line).s("fd ").i(fd).s(": the POSIX lock on '").s(path)
            .s("' that saving its contents dropped could not be taken again").c_str());
      }
  }
  return rc;
}

}  // namespace

bool files_first(dev_t dev, ino_t ino) {
  for (int k = 0; k < g_nsaved; ++k)
    if (g_saved[k].dev == dev && g_saved[k].ino == ino) return false;
  if (g_nsaved < kMaxFds) g_saved[g_nsaved++] = FileId{dev, ino};
  return true;
}

bool files_saved(dev_t dev, ino_t ino) {
  for (int k = 0; k < g_nsaved; ++k)
    if (g_saved[k].dev == dev && g_saved[k].ino == ino) return true;
  return false;
}

void files_too_large(const char* path, dev_t dev, ino_t ino, int64_t size) {
  for (int k = 0; k < g_nwarned; ++k)
    if (g_warned[k].dev == dev && g_warned[k].ino == ino) return;
  if (g_nwarned < int(sizeof g_warned / sizeof g_warned[0])) g_warned[g_nwarned++] = FileId{dev, ino};
  char line[PATH_MAX + 240];
  warn(Msg(line, sizeof line).s("file '").s(path).s("' (").i(size).s(" bytes) is larger than ")
      .i(g_files.max_bytes >> 20).s(" MiB (REVIVE_FILES_MAX_MB): its contents are not saved; a restart cuts it "
      "back to its checkpoint size, and fails if it shrank").c_str());
}

bool files_under(const char* path, const char* dir) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') --n;
  return n > 0 && strncmp(path, dir, n) == 0 && path[n] == '/';
}

bool files_local(const char* path) {
  for (const char* d = g_files.local; *d;) {
    const char* e = strchr(d, ':');
    size_t n = e ? size_t(e - d) : strlen(d);
    while (n > 1 && d[n - 1] == '/') --n;  // "/tmp/" is "/tmp"
    if (n > 0 && strncmp(path, d, n) == 0 && (path[n] == '/' || (n == 1 && d[0] == '/'))) return true;
    if (!e) break;
    d = e + 1;
  }
  return false;
}

int files_put(Out& out, FileOrigin origin, int fd, const char* path, int64_t size, uint32_t mode,
              int64_t mtime_sec, int64_t mtime_nsec, const FileIdentity* id) {
  FileEntry e{};
  e.origin = static_cast<uint32_t>(origin);
  e.mode = mode;
  e.size = size;
  e.mtime_sec = mtime_sec;
  e.mtime_nsec = mtime_nsec;
  e.dir_mode = parent_mode(path);
  const bool blocks = files_blocks_on(size);
  e.format = uint32_t(blocks ? FileFormat::kBlocks : FileFormat::kInline);
  out.bytes(&e, sizeof e);
  out.str(path, strlen(path));
  if (file_origin_has_id(uint32_t(origin))) out.bytes(id, sizeof *id);
  if (blocks) {
    int rc = files_put_blocks(out, fd, path, size);
    return rc != 0 ? rc : out.ok() ? 0 : -ENOMEM;
  }
  static char buf[1 << 16];
  for (int64_t off = 0; off < size;) {
    size_t want = size - off < int64_t(sizeof buf) ? size_t(size - off) : sizeof buf;
    ssize_t n = pread(fd, buf, want, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Shorter than fstat said: only someone outside the computation can have cut it (ours are held).
      int err = n < 0 ? errno : EIO;
      char line[PATH_MAX + 120];
      warn(Msg(line, sizeof line).s("checkpoint failed: cannot read '").s(path).s("' at ").i(off).s(" of ")
          .i(size).s(" bytes: ").err(err).c_str());
      return -err;
    }
    if (!out.bytes(buf, size_t(n))) return -ENOMEM;
    off += n;
  }
  return out.ok() ? 0 : -ENOMEM;
}

namespace {

int save_all(inject::SectionWriter& w) {
  static int fds[kMaxFds];
  // The checkpoint's moment (the computation is stopped), in the end entry's mtime: the restore moves
  // aside node-local files the stopped run created after it (files_renamed.cpp). 0 before 2026-11-28.
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  Out out(w);
  out.tag(kFilesTag);
  int n = list_fds(0, fds, kMaxFds);
  if (n < 0) {
    warn(n == -EMFILE ? "checkpoint refused: more than 4096 open descriptors" : "checkpoint failed: cannot list /proc/self/fd");
    return n;
  }
  for (int k = 0; k < n; ++k) {
    if (inject::fd_reserved(fds[k])) continue;
    if (int rc = save_fd(out, fds[k]); rc != 0) return rc;
  }
  if (files_walker()) {  // one process per host (files_walker.cpp)
    if (int rc = files_scan(out); rc != 0) return rc;
  }
  if (g_files.displace && (g_files.root || g_files.launch_cwd[0])) {
    if (int rc = files_list_cwd(out); rc != 0) return rc;
  }
  FileEntry end{};
  end.mtime_sec = now.tv_sec;
  end.mtime_nsec = now.tv_nsec;
  out.bytes(&end, sizeof end);
  return out.ok() ? 0 : -ENOMEM;
}

}  // namespace

int files_save(inject::SectionWriter& w) {
  g_nsaved = 0;
  pre_saving(inject::generation_dir());
  files_blocks_begin();
  int rc = save_all(w);
  int end = files_blocks_end(rc == 0);
  return rc != 0 ? rc : end;
}

}  // namespace revive::plugins
