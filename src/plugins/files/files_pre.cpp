// files plugin: pre-images. Once a complete generation G exists, the first time a process is about to
// modify, truncate, replace or delete an existing regular file that G's images do not hold and that has
// not changed since G's checkpoint began, it keeps the file as it is (= as it was at G) in
// DIR/ckpt-G/.pre (preimage_record.h); `revive restart` of G puts every pre-image back before restoring
// any process (src/cli/preimages.cpp). Without it such a file stays as the stopped run left it: make's
// `as` truncating an existing .o after the checkpoint, killed, and the restarted make skipping the broken
// object because it is newer than its source.
//
// "Not changed since G began": the file's ctime is older than the birth time of ckpt-G, which the
// coordinator creates before it asks any process to stop. Both come from the kernel's one coarse clock,
// so a file changed after that instant never looks older; one changed just before it is left out
// (conservative: then its state at G is not certain). A file changed after G by a process under revive
// was preserved by that process first; whoever comes later finds its record and does nothing.
//
// Runs inside the libc wrappers in the program's threads: raw system calls, stack buffers, errno kept,
// never fails the program's call (a pre-image that cannot be written is a warning naming the file).
#include "plugins/files/files_pre.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject/sys.h"
#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/preimage_record.h"
#include "plugins/plugins.h"

#define XXH_INLINE_ALL  // header-only: nothing to link into the preloaded library
#include <xxhash.h>

namespace revive::plugins {
namespace {

namespace sys = inject::sys;

struct Target {
  char pre[1280];        // DIR/ckpt-G/.pre
  int64_t t_sec, t_nsec; // birth time of DIR/ckpt-G
  uint32_t epoch;        // bumped when the target changes (the table below forgets older entries)
  bool on;
};
Target g_t;
char g_next[1200];       // the generation this process's checkpoint is writing (files_save)
bool g_warned_btime;
volatile int g_quiet;    // the engine's plugins are saving or restoring: their own opens are not the program's
int64_t g_t0_sec = -1, g_t0_nsec;  // REVIVE_LAUNCH_T0 (all processes): node-local files born since are the walk's
PreStats g_stats;

// Files already preserved (or found preserved) for the current target: a direct-mapped cache, so a
// second open of the same file costs one stat. A collision only costs a look at the record on disk.
struct Done {
  uint64_t dev, ino;
  uint32_t epoch;
};
constexpr uint32_t kDone = 1024;
Done g_done[kDone];
// Files too large to preserve, warned about once per process.
Done g_big[64];

uint32_t slot(uint64_t dev, uint64_t ino) { return uint32_t((ino * 0x9E3779B97F4A7C15ull) ^ dev) & (kDone - 1); }
bool done(uint64_t dev, uint64_t ino) {
  const Done& d = g_done[slot(dev, ino)];
  return d.ino == ino && d.dev == dev && d.epoch == g_t.epoch;
}
void mark(uint64_t dev, uint64_t ino) { g_done[slot(dev, ino)] = Done{dev, ino, g_t.epoch}; }

bool under(const char* path, const char* dir) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') --n;
  return n > 0 && strncmp(path, dir, n) == 0 && path[n] == '/';
}

// Sets the target to gen_dir (DIR/ckpt-G); off when its birth time cannot be had.
void set_target(const char* gen_dir) {
  struct statx sx;
  if (!gen_dir || !*gen_dir || sys::sc(SYS_statx, AT_FDCWD, gen_dir, 0, STATX_BTIME, &sx) != 0) return;
  if (!(sx.stx_mask & STATX_BTIME)) {
    if (!g_warned_btime) {
      g_warned_btime = true;
      char line[1400];
      warn(Msg(line, sizeof line).s("the file system of '").s(gen_dir).s("' keeps no birth times: files changed "
          "after the checkpoint are not preserved (a restart leaves them as the stopped run left them)").c_str());
    }
    g_t.on = false;
    return;
  }
  Msg(g_t.pre, sizeof g_t.pre).s(gen_dir).s("/").s(kPreDir);
  g_t.t_sec = sx.stx_btime.tv_sec;
  g_t.t_nsec = sx.stx_btime.tv_nsec;
  ++g_t.epoch;
  g_t.on = g_files.written;  // REVIVE_FILES=none: the files plugin keeps nothing, pre-images included
}

bool before_target(int64_t sec, int64_t nsec) { return sec < g_t.t_sec || (sec == g_t.t_sec && nsec < g_t.t_nsec); }

void warn_failed(const char* path, const char* what, long rc) {
  char line[PATH_MAX + 400];
  warn(Msg(line, sizeof line).s("process ").i(sys::getpid()).s(": cannot keep the pre-image of '").s(path).s("' in '").s(g_t.pre).s("' (").s(what)
      .s(": ").err(int(-rc)).s("): a restart from this checkpoint leaves it as the run changed it").c_str());
}

void warn_big(const char* path, uint64_t dev, uint64_t ino, int64_t size) {
  for (auto& b : g_big)
    if (b.dev == dev && b.ino == ino && b.epoch) return;
  for (auto& b : g_big)
    if (!b.epoch) {
      b = Done{dev, ino, 1};
      break;
    }
  char line[PATH_MAX + 300];
  warn(Msg(line, sizeof line).s("process ").i(sys::getpid()).s(": file '").s(path).s("' (").i(size)
      .s(" bytes) changed after the checkpoint is larger "
      "than ").i(g_files.max_bytes >> 20).s(" MiB (REVIVE_FILES_MAX_MB): its pre-image is not kept; a restart "
      "leaves it as the run changed it").c_str());
}

// Copies src into dst: a clone where the file system shares extents, else in the kernel. 0 or -errno.
long copy_into(int dst, int src) {
  if (sys::sc(SYS_ioctl, dst, FICLONE, src) == 0) return 0;
  for (;;) {
    long n = sys::sc(SYS_copy_file_range, src, nullptr, dst, nullptr, size_t(1) << 30, 0);
    if (n == 0) return 0;
    if (n > 0) continue;
    if (n == -EINTR) continue;
    if (n != -EXDEV && n != -EINVAL && n != -EOPNOTSUPP && n != -ENOSYS) return n;
    break;  // another file system on an older kernel: sendfile from the current offsets
  }
  long off = sys::sc(SYS_lseek, dst, 0, SEEK_CUR);
  if (off < 0) return off;
  sys::sc(SYS_lseek, src, off, SEEK_SET);
  for (;;) {
    long n = sys::sc(SYS_sendfile, dst, src, nullptr, size_t(1) << 30);
    if (n == 0) return 0;
    if (n < 0 && n != -EINTR) return n;
  }
}

// XXH3-64 of fd's first `size` bytes (mapped). 0 or -errno.
long hash_fd(int fd, uint64_t size, uint64_t* out) {
  if (size == 0) {
    *out = XXH3_64bits(nullptr, 0);
    return 0;
  }
  long p = sys::sc(SYS_mmap, 0, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p < 0 && p > -4096) return p;
  *out = XXH3_64bits(reinterpret_cast<const void*>(p), size);
  sys::sc(SYS_munmap, p, size);
  return 0;
}

// Keeps the file `fd` (O_PATH, at abs path `path`, stat sx) in the target directory. 0 or -errno (warned).
long preserve(int fd, const char* path, const struct statx& sx) {
  const uint64_t dev = (uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor, ino = sx.stx_ino;
  char name[64], rec[1400], data[1400], tmp[1400], self[40];
  Msg(name, sizeof name).u(dev).s("-").u(ino);
  Msg(rec, sizeof rec).s(g_t.pre).s("/").s(name);
  const int tid = sys::gettid();
  char data_name[96];
  Msg(data_name, sizeof data_name).s(name).s(".").i(tid).s(".d");
  Msg(data, sizeof data).s(g_t.pre).s("/").s(data_name);
  Msg(tmp, sizeof tmp).s(g_t.pre).s("/").s(name).s(".").i(tid).s(".r");
  Msg(self, sizeof self).s("/proc/self/fd/").i(fd);
  if (sys::sc(SYS_faccessat, AT_FDCWD, rec, F_OK) == 0) return 0;  // someone was first
  long rc = sys::sc(SYS_mkdirat, AT_FDCWD, g_t.pre, 0700);
  if (rc != 0 && rc != -EEXIST) return warn_failed(path, "mkdir", rc), rc;
  sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);  // a leftover of a killed thread of this number
  // Always a copy (a clone where the filesystem shares extents), never a hard link of a file about to
  // lose its only name: the inode lives on in its mappings and open descriptors, and a write through
  // one (Open MPI's PMIx lock segment in /tmp, mapped by every rank, unlinked at the job's end) changed
  // the linked pre-image after its checksum was taken, so `revive run`'s restart refused it as damaged.
  int src = int(sys::sc(SYS_openat, AT_FDCWD, self, O_RDONLY | O_CLOEXEC));
  if (src < 0) return warn_failed(path, "read", src), src;
  int dfd = int(sys::sc(SYS_openat, AT_FDCWD, data, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (dfd < 0) {
    sys::sc(SYS_close, src);
    return warn_failed(path, "create", dfd), dfd;
  }
  rc = copy_into(dfd, src);
  sys::sc(SYS_close, src);
  if (rc != 0) {
    sys::sc(SYS_close, dfd);
    sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);
    return warn_failed(path, "copy", rc), rc;
  }
  struct stat ds;
  uint64_t h = 0;
  rc = sys::sc(SYS_fsync, dfd);
  if (rc == 0) rc = sys::sc(SYS_fstat, dfd, &ds);
  if (rc == 0) rc = hash_fd(dfd, uint64_t(ds.st_size), &h);
  sys::sc(SYS_close, dfd);
  if (rc != 0) {
    sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);
    return warn_failed(path, "write", rc), rc;
  }
  alignas(8) char buf[sizeof(PreRecord) + PATH_MAX + 96];
  PreRecord r{};
  memcpy(r.magic, kPreMagic, sizeof r.magic);
  r.version = kPreVersion;
  r.dev = dev;
  r.ino = ino;
  r.size = uint64_t(ds.st_size);
  r.mode = sx.stx_mode & 07777;
  r.uid = sx.stx_uid;
  r.gid = sx.stx_gid;
  r.path_len = uint32_t(strlen(path));
  r.data_len = uint32_t(strlen(data_name));
  r.mtime_sec = sx.stx_mtime.tv_sec;
  r.mtime_nsec = sx.stx_mtime.tv_nsec;
  r.data_hash = h;
  const size_t len = sizeof r + r.path_len + r.data_len;
  memcpy(buf, &r, sizeof r);
  memcpy(buf + sizeof r, path, r.path_len);
  memcpy(buf + sizeof r + r.path_len, data_name, r.data_len);
  r.self_hash = XXH3_64bits(buf, len);
  memcpy(buf, &r, sizeof r);
  int tfd = int(sys::sc(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  rc = tfd < 0 ? tfd : sys::write_all(tfd, buf, len);
  if (rc == 0) rc = sys::sc(SYS_fsync, tfd);
  if (tfd >= 0) sys::sc(SYS_close, tfd);
  // Published last, atomically: a record names complete, durable contents. First one wins.
  if (rc == 0) rc = sys::sc(SYS_linkat, AT_FDCWD, tmp, AT_FDCWD, rec, 0);
  sys::sc(SYS_unlinkat, AT_FDCWD, tmp, 0);
  if (rc != 0) {
    sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);
    if (rc == -EEXIST) return 0;
    return warn_failed(path, "record", rc), rc;
  }
  int dir = int(sys::sc(SYS_openat, AT_FDCWD, g_t.pre, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir >= 0) {
    sys::sc(SYS_fsync, dir);
    sys::sc(SYS_close, dir);
  }
  ++g_stats.preserved;
  return 0;
}

// The common path of every hook: is `path` (relative to dirfd) a file to preserve now?
void consider(int dirfd, const char* path, bool follow) {
  if (!g_t.on || g_quiet || !path || !*path) return;
  struct stat st;  // the one check most calls stop at
  if (sys::sc(SYS_newfstatat, dirfd, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
      !before_target(st.st_ctim.tv_sec, st.st_ctim.tv_nsec) || done(st.st_dev, st.st_ino))
    return;
  int fd = int(sys::sc(SYS_openat, dirfd, path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)));
  if (fd < 0) return;
  struct statx sx;
  char self[40], abs[PATH_MAX];
  Msg(self, sizeof self).s("/proc/self/fd/").i(fd);
  long n = sys::sc(SYS_readlinkat, AT_FDCWD, self, abs, sizeof abs - 1);
  bool take = n > 1 && sys::sc(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &sx) == 0 &&
              S_ISREG(sx.stx_mode) && sx.stx_nlink > 0;
  if (take) {
    abs[n] = '\0';
    const uint64_t dev = (uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
    // Not ours: revive's own files; what G's images of this process hold (written back anyway);
    // node-local files born since the launch (the launch root's walk saves those).
    if (abs[0] != '/' || under(abs, inject::checkpoint_dir()) || files_saved(st.st_dev, st.st_ino) ||
        (g_t0_sec >= 0 && files_local(abs) && (sx.stx_mask & STATX_BTIME) &&
         (sx.stx_btime.tv_sec > g_t0_sec || (sx.stx_btime.tv_sec == g_t0_sec && sx.stx_btime.tv_nsec >= g_t0_nsec)))) {
      ++g_stats.skipped;
    } else if (int64_t(sx.stx_size) > g_files.max_bytes) {
      warn_big(abs, dev, sx.stx_ino, int64_t(sx.stx_size));
    } else {
      preserve(fd, abs, sx);
    }
  }
  sys::sc(SYS_close, fd);
  mark(st.st_dev, st.st_ino);  // whatever came of it: once per file and generation
}

struct KeepErrno {
  int e = errno;
  ~KeepErrno() { errno = e; }
};

}  // namespace

void pre_open(int dirfd, const char* path, int flags) {
  if (!g_t.on || (flags & O_PATH) || ((flags & O_CREAT) && (flags & O_EXCL))) return;
  if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC)) return;
  KeepErrno k;
  consider(dirfd, path, !(flags & O_NOFOLLOW));
}

void pre_fopen(const char* path, const char* mode) {
  if (!g_t.on || !path || !mode || strchr(mode, 'x')) return;
  if (mode[0] == 'r' && !strchr(mode, '+')) return;
  KeepErrno k;
  consider(AT_FDCWD, path, true);
}

void pre_path(int dirfd, const char* path, bool follow) {
  if (!g_t.on) return;
  KeepErrno k;
  consider(dirfd, path, follow);
}

void pre_fd(int fd) {
  if (!g_t.on) return;
  KeepErrno k;
  char self[40];
  Msg(self, sizeof self).s("/proc/self/fd/").i(fd);
  consider(AT_FDCWD, self, true);
}

void pre_init() {
  if (const char* v = getenv("REVIVE_LAUNCH_T0")) {
    const long long t0 = strtoll(v, nullptr, 10);
    g_t0_sec = t0 / 1000000000;
    g_t0_nsec = t0 % 1000000000;
  }
  // The newest complete generation on disk (ckpt-G with a MANIFEST.json): a program exec'd after it.
  const char* dir = inject::checkpoint_dir();
  if (!dir || !*dir) return;
  int d = int(sys::sc(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d < 0) return;
  alignas(8) char ents[4096];
  uint64_t best = 0;
  for (;;) {
    long got = sys::sc(SYS_getdents64, d, ents, sizeof ents);
    if (got <= 0) break;
    for (long pos = 0; pos < got;) {
      auto* e = reinterpret_cast<struct dirent64*>(ents + pos);
      pos += e->d_reclen;
      const char* nm = e->d_name;
      if (strncmp(nm, "ckpt-", 5) != 0) continue;
      const char* p = nm + 5;
      uint64_t g = sys::parse_dec(p);
      if (*p || g <= best) continue;
      char m[64];
      Msg(m, sizeof m).s(nm).s("/MANIFEST.json");
      if (sys::sc(SYS_faccessat, d, m, F_OK) == 0) best = g;
    }
  }
  sys::sc(SYS_close, d);
  if (!best) return;
  char gen[1200];
  Msg(gen, sizeof gen).s(dir).s("/ckpt-").u(best);
  set_target(gen);
}

void pre_saving(const char* gen_dir) { Msg(g_next, sizeof g_next).s(gen_dir ? gen_dir : ""); }

// After this process's part of G is durable: G is the generation a restart would take, so files changed
// from now on are kept for it. (With REVIVE_FORK the image is durable a little later; a generation whose
// writer fails then is never restarted, so pre-images in it are merely unused.)
void pre_resumed(bool ok) {
  if (ok && g_next[0]) set_target(g_next);
  g_next[0] = '\0';
}

void pre_restored(const char* image) {
  char gen[1200];
  Msg(gen, sizeof gen).s(image ? image : "");
  char* slash = strrchr(gen, '/');
  if (!slash || slash == gen) return;
  *slash = '\0';
  set_target(gen);
}

const PreStats& pre_stats() { return g_stats; }

}  // namespace revive::plugins

namespace revive::inject {
void preimage_quiet(bool on) { plugins::g_quiet = on ? 1 : 0; }
}  // namespace revive::inject
