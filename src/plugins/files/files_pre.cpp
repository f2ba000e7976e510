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
#include <sys/sysmacros.h>
#include <sys/utsname.h>
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
int64_t g_next_sec = -1, g_next_nsec;  // the moment it was taken (pre_saving), -1: unknown
bool g_warned_btime;
volatile int g_quiet;    // the engine's plugins are saving or restoring: their own opens are not the program's
PreStats g_stats;

// Files already preserved (or found preserved) for the current target: a direct-mapped cache, so a
// second open of the same file costs one stat. A collision only costs a look at the record on disk.
enum : uint32_t { kSeenCut = 1, kSeenFinal = 2 };  // a cut-back record only (appends); nothing more to do
struct Done {
  uint64_t dev, ino;
  uint32_t epoch, state;
};
constexpr uint32_t kDone = 1024;
Done g_done[kDone];
// Files too large to preserve, warned about once per process.
Done g_big[64];

uint32_t slot(uint64_t dev, uint64_t ino) { return uint32_t((ino * 0x9E3779B97F4A7C15ull) ^ dev) & (kDone - 1); }
uint32_t seen(uint64_t dev, uint64_t ino) {
  const Done& d = g_done[slot(dev, ino)];
  return d.ino == ino && d.dev == dev && d.epoch == g_t.epoch ? d.state : 0;
}
void mark(uint64_t dev, uint64_t ino, uint32_t state) { g_done[slot(dev, ino)] = Done{dev, ino, g_t.epoch, state}; }
// Sets the target to gen_dir (DIR/ckpt-G); off when its birth time cannot be had.
// at_sec >= 0: the moment G was taken (pre_saving's), else the directory's birth time.
void set_target(const char* gen_dir, int64_t at_sec = -1, int64_t at_nsec = 0) {
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
  g_t.t_sec = at_sec >= 0 ? at_sec : sx.stx_btime.tv_sec;
  g_t.t_nsec = at_sec >= 0 ? at_nsec : sx.stx_btime.tv_nsec;
  ++g_t.epoch;
  g_t.on = g_files.written;  // REVIVE_FILES=none: the files plugin keeps nothing, pre-images included
}

// The moment G was taken: the birth time of `ckpt-G/.moment`, which the first process to save G makes
// while the whole computation is suspended (the others find it made; a refused attempt's is removed with
// its images by the coordinator before the next attempt). The file system's own clock, as every ctime it
// is compared with. Not the directory's birth time: the directory is made when the checkpoint is asked
// for, and a request refused for now (a process with inotify events unread, a fork in flight) is taken
// again up to seconds later; a file created in between existed at G but looked born after it, so its
// deletion or append after G kept no pre-image and a restart lost it or kept the appended bytes (found
// by engine.inotify: "unlink: No such file or directory" after the restart; and by a job script whose
// workers append under `flock`: a number taken twice). Programs exec'd later read the same file.
// Returns false (and the directory's birth time is used) when it cannot be made or read.
bool moment_of(const char* gen_dir, bool make, int64_t* sec, int64_t* nsec) {
  char m[1300];
  Msg(m, sizeof m).s(gen_dir).s("/.moment");
  int fd = make ? int(sys::sc(SYS_openat, AT_FDCWD, m, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) : -1;
  if (fd < 0) fd = int(sys::sc(SYS_openat, AT_FDCWD, m, O_PATH | O_CLOEXEC));
  if (fd < 0) return false;
  struct statx sx;
  bool ok = sys::sc(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME);
  sys::sc(SYS_close, fd);
  if (ok) {
    *sec = sx.stx_btime.tv_sec;
    *nsec = sx.stx_btime.tv_nsec;
  }
  return ok;
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
      b = Done{dev, ino, 1, 0};
      break;
    }
  char line[PATH_MAX + 300];
  warn(Msg(line, sizeof line).s("process ").i(sys::getpid()).s(": file '").s(path).s("' (").i(size)
      .s(" bytes) changed after the checkpoint is larger "
      "than ").i(g_files.max_bytes >> 20).s(" MiB (REVIVE_FILES_MAX_MB): its pre-image is not kept; a restart "
      "leaves it as the run changed it").c_str());
}

// Copies src's first `limit` bytes into dst: a clone where the file system shares extents (of the whole
// file: the caller cuts it to `limit`), else in the kernel. 0 or -errno.
long copy_into(int dst, int src, uint64_t limit) {
  if (sys::sc(SYS_ioctl, dst, FICLONE, src) == 0) return 0;
  constexpr uint64_t kStep = uint64_t(1) << 30;
  uint64_t copied = 0;
  for (;;) {
    if (copied >= limit) return 0;
    long n = sys::sc(SYS_copy_file_range, src, nullptr, dst, nullptr, size_t(limit - copied < kStep ? limit - copied : kStep), 0);
    if (n == 0) return 0;
    if (n > 0) {
      copied += uint64_t(n);
      continue;
    }
    if (n == -EINTR) continue;
    if (n != -EXDEV && n != -EINVAL && n != -EOPNOTSUPP && n != -ENOSYS) return n;
    break;  // another file system on an older kernel: sendfile from the current offsets
  }
  long off = sys::sc(SYS_lseek, dst, 0, SEEK_CUR);
  if (off < 0) return off;
  sys::sc(SYS_lseek, src, off, SEEK_SET);
  for (;;) {
    if (copied >= limit) return 0;
    long n = sys::sc(SYS_sendfile, dst, src, nullptr, size_t(limit - copied < kStep ? limit - copied : kStep));
    if (n == 0) return 0;
    if (n > 0) copied += uint64_t(n);
    else if (n != -EINTR) return n;
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

// The host a record says made it (`revive restart --hosts` puts it back there only): REVIVE_HOST_ID,
// else the node name, as the coordinator's HELLO names hosts.
const char* host_of(char* buf, size_t n) {
  const char* h = inject::host_name();
  if (h && *h) return h;
  struct utsname u;
  buf[0] = '\0';
  if (sys::sc(SYS_uname, &u) == 0) Msg(buf, n).s(u.nodename);
  return buf;
}

// "<dev>-<ino>-<host>": the record's name (host: XXH3-64 of host_of, so that equal (dev, ino) pairs of
// two hosts' node-local files sharing one checkpoint directory never claim one name).
void record_name(char* out, size_t n, uint64_t dev, uint64_t ino) {
  char hb[72];
  const char* host = host_of(hb, sizeof hb);
  Msg(out, n).u(dev).s("-").u(ino).s("-").u(XXH3_64bits(host, strlen(host)));
}

// Writes record r and the names after it (path, data_name, host) under tmp, fsyncs it and links it at
// rec: published atomically, the first process wins. 0, -EEXIST (another was first) or -errno.
long publish(PreRecord& r, const char* path, const char* data_name, const char* tmp, const char* rec) {
  char hb[72];
  const char* host = host_of(hb, sizeof hb);
  alignas(8) char buf[sizeof(PreRecord) + PATH_MAX + 128 + 80];
  memcpy(r.magic, kPreMagic, sizeof r.magic);
  r.version = kPreVersion;
  r.path_len = uint32_t(strlen(path));
  r.data_len = uint32_t(strlen(data_name));
  r.host_len = uint32_t(strnlen(host, 72));
  r.self_hash = 0;
  if (r.path_len > PATH_MAX || r.data_len > 128) return -ENAMETOOLONG;
  const size_t len = sizeof r + r.path_len + r.data_len + r.host_len;
  memcpy(buf, &r, sizeof r);
  memcpy(buf + sizeof r, path, r.path_len);
  memcpy(buf + sizeof r + r.path_len, data_name, r.data_len);
  memcpy(buf + sizeof r + r.path_len + r.data_len, host, r.host_len);
  r.self_hash = XXH3_64bits(buf, len);
  memcpy(buf, &r, sizeof r);
  int tfd = int(sys::sc(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  long rc = tfd < 0 ? tfd : sys::write_all(tfd, buf, len);
  if (rc == 0) rc = sys::sc(SYS_fsync, tfd);
  if (tfd >= 0) sys::sc(SYS_close, tfd);
  // Published last, atomically: a record names complete, durable contents. First one wins.
  if (rc == 0) rc = sys::sc(SYS_linkat, AT_FDCWD, tmp, AT_FDCWD, rec, 0);
  sys::sc(SYS_unlinkat, AT_FDCWD, tmp, 0);
  if (rc != 0) return rc;
  int dir = int(sys::sc(SYS_openat, AT_FDCWD, g_t.pre, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir >= 0) {
    sys::sc(SYS_fsync, dir);
    sys::sc(SYS_close, dir);
  }
  return 0;
}

// The cut-back record at `cut` of the file (dev, ino), checked: true and *out when there is a valid one.
bool read_cut(const char* cut, uint64_t dev, uint64_t ino, PreRecord* out) {
  int fd = int(sys::sc(SYS_openat, AT_FDCWD, cut, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  alignas(8) char buf[sizeof(PreRecord) + PATH_MAX + 128 + 80];
  long n = sys::sc(SYS_read, fd, buf, sizeof buf);
  sys::sc(SYS_close, fd);
  if (n < long(sizeof(PreRecord))) return false;
  memcpy(out, buf, sizeof *out);
  const size_t len = sizeof(PreRecord) + size_t(out->path_len) + out->data_len + out->host_len;
  if (memcmp(out->magic, kPreMagic, 4) != 0 || out->version != kPreVersion || out->kind != kPreCut ||
      out->dev != dev || out->ino != ino || len != size_t(n))
    return false;
  PreRecord z = *out;
  z.self_hash = 0;
  memcpy(buf, &z, sizeof z);
  return XXH3_64bits(buf, len) == out->self_hash;
}

void warn_lost(const char* path, const char* why) {
  char line[PATH_MAX + 500];
  warn(Msg(line, sizeof line).s("process ").i(sys::getpid()).s(": file '").s(path).s("': ").s(why)
      .s(": its pre-image is not kept; a restart from this checkpoint leaves it as the run changed it").c_str());
}

// Keeps the file `fd` (O_PATH, at abs path `path`, stat sx) in the target directory: before an append
// (O_APPEND), only its size, to cut it back to (a cut-back record); before any other change, a copy of
// it, or, when it has a cut-back record, of the bytes it had at G (its first `size`). Returns what is
// left to do for this file in this generation (kSeenCut: a copy if a change other than an append comes;
// kSeenFinal: nothing); a failure is warned.
uint32_t preserve(int fd, const char* path, const struct statx& sx, bool append) {
  const uint64_t dev = (uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor, ino = sx.stx_ino;
  char name[96], rec[1400], cut[1400], data[1400], tmp[1400], self[40];
  record_name(name, sizeof name, dev, ino);
  Msg(rec, sizeof rec).s(g_t.pre).s("/").s(name);
  Msg(cut, sizeof cut).s(rec).s(kPreCutSuffix);
  const int tid = sys::gettid();
  char data_name[128];
  Msg(data_name, sizeof data_name).s(name).s(".").i(tid).s(".d");
  Msg(data, sizeof data).s(g_t.pre).s("/").s(data_name);
  Msg(tmp, sizeof tmp).s(g_t.pre).s("/").s(name).s(".").i(tid).s(".r");
  Msg(self, sizeof self).s("/proc/self/fd/").i(fd);
  if (sys::sc(SYS_faccessat, AT_FDCWD, rec, F_OK) == 0) return kSeenFinal;  // someone was first
  if (append && sys::sc(SYS_faccessat, AT_FDCWD, cut, F_OK) == 0) return kSeenCut;
  long rc = sys::sc(SYS_mkdirat, AT_FDCWD, g_t.pre, 0700);
  if (rc != 0 && rc != -EEXIST) return warn_failed(path, "mkdir", rc), kSeenFinal;
  PreRecord r{};
  r.dev = dev;
  r.ino = ino;
  r.mode = sx.stx_mode & 07777;
  r.uid = sx.stx_uid;
  r.gid = sx.stx_gid;
  r.mtime_sec = sx.stx_mtime.tv_sec;
  r.mtime_nsec = sx.stx_mtime.tv_nsec;
  if (sx.stx_mask & STATX_BTIME) {
    r.btime_sec = sx.stx_btime.tv_sec;
    r.btime_nsec = sx.stx_btime.tv_nsec;
  }
  if (append) {
    // An append cannot change the bytes the file had: its size is enough (and its metadata).
    r.kind = kPreCut;
    r.size = sx.stx_size;
    rc = publish(r, path, "", tmp, cut);
    if (rc == 0) ++g_stats.cut_back;
    if (rc == 0 || rc == -EEXIST) return kSeenCut;
    return warn_failed(path, "record", rc), kSeenFinal;
  }
  // Appended to since G (a cut-back record): G's bytes are the first `size`, G's metadata the record's.
  PreRecord c;
  bool had_cut = read_cut(cut, dev, ino, &c);
  if (had_cut && sx.stx_size < c.size) {
    sys::sc(SYS_unlinkat, AT_FDCWD, cut, 0);  // it would cut back a file that is no longer G's
    warn_lost(path, "shorter than at the checkpoint although the processes under revive only appended to it");
    return kSeenFinal;
  }
  if (int64_t(had_cut ? c.size : sx.stx_size) > g_files.max_bytes) {
    if (had_cut) sys::sc(SYS_unlinkat, AT_FDCWD, cut, 0);
    warn_big(path, dev, ino, int64_t(had_cut ? c.size : sx.stx_size));
    return kSeenFinal;
  }
  sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);  // a leftover of a killed thread of this number
  // Always a copy (a clone where the filesystem shares extents), never a hard link of a file about to
  // lose its only name: the inode lives on in its mappings and open descriptors, and a write through
  // one (Open MPI's PMIx lock segment in /tmp, mapped by every rank, unlinked at the job's end) changed
  // the linked pre-image after its checksum was taken, so `revive run`'s restart refused it as damaged.
  int src = int(sys::sc(SYS_openat, AT_FDCWD, self, O_RDONLY | O_CLOEXEC));
  if (src < 0) return warn_failed(path, "read", src), kSeenFinal;
  int dfd = int(sys::sc(SYS_openat, AT_FDCWD, data, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (dfd < 0) {
    sys::sc(SYS_close, src);
    return warn_failed(path, "create", dfd), kSeenFinal;
  }
  rc = copy_into(dfd, src, had_cut ? c.size : UINT64_MAX);
  sys::sc(SYS_close, src);
  // A process appending concurrently may have published its cut-back record (and appended) while this
  // copy ran: the bytes past its size are not G's.
  if (rc == 0 && !had_cut) had_cut = read_cut(cut, dev, ino, &c);
  struct stat ds;
  if (rc == 0) rc = sys::sc(SYS_fstat, dfd, &ds);
  if (rc == 0 && had_cut) {
    if (uint64_t(ds.st_size) < c.size) rc = -ENODATA;  // it shrank meanwhile: not G's any more
    else if (uint64_t(ds.st_size) > c.size) rc = sys::sc(SYS_ftruncate, dfd, c.size);
    ds.st_size = off_t(c.size);
    r.mode = c.mode, r.uid = c.uid, r.gid = c.gid;
    r.mtime_sec = c.mtime_sec, r.mtime_nsec = c.mtime_nsec;
    r.btime_sec = c.btime_sec, r.btime_nsec = c.btime_nsec;
  }
  uint64_t h = 0;
  if (rc == 0) rc = sys::sc(SYS_fsync, dfd);
  if (rc == 0) rc = hash_fd(dfd, uint64_t(ds.st_size), &h);
  sys::sc(SYS_close, dfd);
  if (rc != 0) {
    sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);
    return warn_failed(path, "copy", rc), kSeenFinal;
  }
  r.kind = kPreCopy;
  r.size = uint64_t(ds.st_size);
  r.data_hash = h;
  rc = publish(r, path, data_name, tmp, rec);
  if (rc != 0) {
    sys::sc(SYS_unlinkat, AT_FDCWD, data, 0);
    if (rc != -EEXIST) warn_failed(path, "record", rc);
    return kSeenFinal;
  }
  ++g_stats.preserved;
  return kSeenFinal;
}

// The common path of every hook: is `path` (relative to dirfd) a file to preserve now, before an append
// (`append`) or before any other change?
void consider(int dirfd, const char* path, bool follow, bool append) {
  if (!g_t.on || g_quiet || !path || !*path) return;
  struct statx s0;  // the one check most calls stop at
  if (sys::sc(SYS_statx, dirfd, path, follow ? 0 : AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &s0) != 0 ||
      !S_ISREG(s0.stx_mode))
    return;
  const uint64_t sdev = makedev(s0.stx_dev_major, s0.stx_dev_minor), ino = s0.stx_ino;
  const uint32_t state = seen(sdev, ino);
  if (state == kSeenFinal || (state == kSeenCut && append)) return;
  if (!before_target(s0.stx_ctime.tv_sec, s0.stx_ctime.tv_nsec)) {
    // Changed since G: only a file whose changes since were appends (it has a cut-back record, maybe
    // another process's) still needs its pre-image, a copy, now that another kind of change comes.
    if (append) return;
    if (state != kSeenCut) {
      if ((s0.stx_mask & STATX_BTIME) && !before_target(s0.stx_btime.tv_sec, s0.stx_btime.tv_nsec)) return;  // born since
      char name[96], cut[1400];
      record_name(name, sizeof name, (uint64_t(s0.stx_dev_major) << 32) | s0.stx_dev_minor, ino);
      Msg(cut, sizeof cut).s(g_t.pre).s("/").s(name).s(kPreCutSuffix);
      if (sys::sc(SYS_faccessat, AT_FDCWD, cut, F_OK) != 0) {
        mark(sdev, ino, kSeenFinal);
        return;
      }
    }
  }
  int fd = int(sys::sc(SYS_openat, dirfd, path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)));
  if (fd < 0) return;
  struct statx sx;
  char self[40], abs[PATH_MAX];
  Msg(self, sizeof self).s("/proc/self/fd/").i(fd);
  long n = sys::sc(SYS_readlinkat, AT_FDCWD, self, abs, sizeof abs - 1);
  bool take = n > 1 && sys::sc(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &sx) == 0 &&
              S_ISREG(sx.stx_mode) && sx.stx_nlink > 0;
  uint32_t next = kSeenFinal;
  if (take) {
    abs[n] = '\0';
    // Not ours: revive's own files; what G's images of this process hold (written back anyway). Node-local
    // files born since the launch are kept too (until 2026-11-28 they were left to the launch root's walk,
    // which does not enter a directory whose parent did not change since the launch: a file made in
    // /tmp/job/a/b before G and deleted after it was lost by a restart). Where the walk saved one as
    // well, both hold its state at G.
    if (abs[0] != '/' || files_under(abs, inject::checkpoint_dir()) || files_saved(sdev, ino)) {
      ++g_stats.skipped;
    } else {
      next = preserve(fd, abs, sx, append);
    }
  }
  sys::sc(SYS_close, fd);
  mark(sdev, ino, next);  // whatever came of it: once per file and generation (and kind of change)
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
  consider(dirfd, path, !(flags & O_NOFOLLOW), (flags & O_APPEND) && !(flags & O_TRUNC));
}

void pre_fopen(const char* path, const char* mode) {
  if (!g_t.on || !path || !mode || strchr(mode, 'x')) return;
  if (mode[0] == 'r' && !strchr(mode, '+')) return;
  KeepErrno k;
  consider(AT_FDCWD, path, true, mode[0] == 'a');
}

void pre_path(int dirfd, const char* path, bool follow) {
  if (!g_t.on) return;
  KeepErrno k;
  consider(dirfd, path, follow, false);
}

void pre_fd(int fd) {
  if (!g_t.on) return;
  KeepErrno k;
  char self[40];
  Msg(self, sizeof self).s("/proc/self/fd/").i(fd);
  consider(AT_FDCWD, self, true, false);
}

void pre_setfl(int fd) {
  if (!g_t.on || g_quiet) return;
  KeepErrno k;
  long fl = sys::sc(SYS_fcntl, fd, F_GETFL);
  if (fl >= 0 && (fl & O_APPEND)) pre_fd(fd);
}

bool pre_active() { return g_t.on && !g_quiet; }

const char* pre_dir() { return g_t.on && g_t.pre[0] ? g_t.pre : nullptr; }

void pre_init() {
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
  int64_t sec = -1, nsec = 0;
  if (!moment_of(gen, false, &sec, &nsec)) sec = -1;
  set_target(gen, sec, nsec);
}

// Called by files_save, while the whole computation is suspended for G.
void pre_saving(const char* gen_dir) {
  Msg(g_next, sizeof g_next).s(gen_dir ? gen_dir : "");
  g_next_sec = -1;
  if (g_next[0] && !moment_of(g_next, true, &g_next_sec, &g_next_nsec)) g_next_sec = -1;
}

// After this process's part of G is durable: G is the generation a restart would take, so files changed
// from now on are kept for it. (With REVIVE_FORK the image is durable a little later; a generation whose
// writer fails then is never restarted, so pre-images in it are merely unused.)
void pre_resumed(bool ok) {
  if (ok && g_next[0]) set_target(g_next, g_next_sec, g_next_nsec);
  g_next[0] = '\0';
}

void pre_restored(const char* image) {
  char gen[1200];
  Msg(gen, sizeof gen).s(image ? image : "");
  char* slash = strrchr(gen, '/');
  if (!slash || slash == gen) return;
  *slash = '\0';
  int64_t sec = -1, nsec = 0;
  if (!moment_of(gen, false, &sec, &nsec)) sec = -1;
  set_target(gen, sec, nsec);
}

const PreStats& pre_stats() { return g_stats; }

}  // namespace revive::plugins

namespace revive::inject {
void preimage_quiet(bool on) { plugins::g_quiet = on ? 1 : 0; }
}  // namespace revive::inject
