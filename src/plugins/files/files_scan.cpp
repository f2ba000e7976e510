// files plugin: the launch root's walk of the node-local directories (REVIVE_LOCAL_DIRS). It finds files
// the computation created and closed but will read again after the checkpoint -- gcc's /tmp/ccXXXX.s
// between cc1 and as -- which no descriptor names at checkpoint time. "Created by the computation" is
// what the creation log (created_log.h) names: (device, inode, birth time) recorded by the libc wrappers
// of every process of the computation as it created the file, so files other programs of the same user
// create there meanwhile are left out. With REVIVE_LOCAL_WALK=birth (programs the wrappers cannot see:
// static binaries, inline system calls), or when the log is damaged (warned), the older rule applies: a
// regular file owned by our effective uid, born (statx btime) at or after the launch -- which takes other
// programs' files too; that is why scanned files are only recreated when missing at restore, never
// overwritten (files_restore.cpp).
//
// Cost: the walk enters only directories modified (an entry created or removed: mtime) since the launch,
// below each configured root, which it always lists; a statx per regular file there. A file created in a
// directory whose parent has not changed since the launch (/tmp/job/a/b/new with /tmp/job/a untouched) is
// therefore not found: list such a directory in REVIVE_LOCAL_DIRS. Bounded by kMaxDirs and kMaxDepth;
// past them the walk stops with a warning (what was found is saved).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

constexpr int kMaxDepth = 12;
constexpr int kMaxDirs = 20000;

struct Walk {
  WalkFile file;  // called for each regular file of a directory modified since the launch
  WalkFile dir_done;  // called for each directory entered, after it was walked (nullptr: none)
  void* ctx;
  const char* lost;  // the warning's end when a limit stops the walk
  bool skip_displaced;
  char path[PATH_MAX];
  dev_t ckpt_dev;
  ino_t ckpt_ino;
  dev_t rec_dev;  // revive's per-user records directory
  ino_t rec_ino;
  dev_t lvl_dev;  // multi-level storage's node-local root
  ino_t lvl_ino;
  int dirs;
  bool stopped;
  int rc;
};

// The save's state beside the walk.
struct Scan {
  Out* out;
  uid_t uid;
  bool by_log;  // the creation log decides (else owner and birth time)
};

alignas(8) char g_bufs[kMaxDepth + 1][4096];  // one getdents buffer per level of the walk

// File system timestamps come from the kernel's coarse clock (one tick, up to 4 ms, behind
// CLOCK_REALTIME): a file created just after the launch may carry a time just before it. 20 ms of slack.
constexpr int64_t kSlackNs = 20 * 1000 * 1000;

bool at_or_after_launch(int64_t sec, int64_t nsec) {
  return sec * 1000000000 + nsec >= g_files.t0_sec * 1000000000 + g_files.t0_nsec - kSlackNs;
}

bool newer(const struct statx_timestamp& t) { return at_or_after_launch(t.tv_sec, t.tv_nsec); }

long do_statx(int dirfd, const char* name, struct statx* sx) {
  return syscall(SYS_statx, dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
                 STATX_TYPE | STATX_MODE | STATX_UID | STATX_SIZE | STATX_MTIME | STATX_BTIME | STATX_INO, sx);
}

void stop(Walk& w, const char* why) {
  if (w.stopped) return;
  w.stopped = true;
  char line[PATH_MAX + 200];
  warn(Msg(line, sizeof line).s("node-local files: stopped walking at '").s(w.path).s("' (").s(why)
      .s("); ").s(w.lost).c_str());
}

int save_file(void* ctx, int dirfd, const char* path, const char* name) {
  Scan& w = *static_cast<Scan*>(ctx);
  struct statx sx;
  if (do_statx(dirfd, name, &sx) != 0 || !S_ISREG(sx.stx_mode) || sx.stx_uid != w.uid) return 0;
  dev_t dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  const bool btime = sx.stx_mask & STATX_BTIME;
  if (w.by_log) {
    if (!created_has(dev, sx.stx_ino, btime ? sx.stx_btime.tv_sec : 0, btime ? sx.stx_btime.tv_nsec : 0)) return 0;
  } else if (!btime || !newer(sx.stx_btime)) {
    return 0;  // no birth time: cannot tell, skip
  }
  if (int64_t(sx.stx_size) > g_files.max_bytes) {
    files_too_large(path, dev, sx.stx_ino, int64_t(sx.stx_size));
    return 0;
  }
  if (!files_first(dev, sx.stx_ino)) return 0;  // open here, saved already
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;  // gone meanwhile (not ours: ours are suspended) or unreadable
  // With a birth time the entry carries the inode's identity, so the restore can tell this file (changed by
  // the stopped run after the checkpoint: rewritten) from another one made at the path since (left alone).
  FileIdentity id{uint64_t(dev), sx.stx_ino, btime ? sx.stx_btime.tv_sec : 0, btime ? sx.stx_btime.tv_nsec : 0, 0};
  int rc = files_put(*w.out, btime ? FileOrigin::kScannedId : FileOrigin::kScanned, fd, path,
                     int64_t(sx.stx_size), sx.stx_mode & 07777, sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec, &id);
  close(fd);
  return rc;
}

void walk(Walk& w, int dirfd, int depth) {
  if (++w.dirs > kMaxDirs) return stop(w, "more than 20000 directories");
  struct stat dst;
  if (fstat(dirfd, &dst) != 0) return;
  if (dst.st_dev == w.ckpt_dev && dst.st_ino == w.ckpt_ino) return;  // revive's own checkpoints
  if (dst.st_dev == w.rec_dev && dst.st_ino == w.rec_ino) return;    // and its records
  if (dst.st_dev == w.lvl_dev && dst.st_ino == w.lvl_ino) return;    // and its node-local images and pieces
  bool fresh = at_or_after_launch(dst.st_mtim.tv_sec, dst.st_mtim.tv_nsec);
  size_t base = strlen(w.path);
  char* buf = g_bufs[depth];
  for (;;) {
    long got = syscall(SYS_getdents64, dirfd, buf, sizeof g_bufs[0]);
    if (got <= 0) return;
    for (long pos = 0; pos < got && w.rc == 0;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + pos);
      pos += d->d_reclen;
      const char* name = d->d_name;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      size_t nl = strlen(name);
      if (base + 1 + nl >= sizeof w.path) continue;
      w.path[base] = '/';
      memcpy(w.path + base + 1, name, nl + 1);
      unsigned char t = d->d_type;
      if (t == DT_UNKNOWN) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
      }
      // A virtual-pid table (plugins/vpid) belongs to the restart that made it: a later restart makes its
      // own, and one brought back would outlive every process that could remove it.
      if (t == DT_REG && fresh && strncmp(name, "revive-vpid-", 12) != 0) {
        w.rc = w.file(w.ctx, dirfd, w.path, name);
      } else if (t == DT_DIR && !(w.skip_displaced && strcmp(name, kDisplacedDir) == 0)) {
        // A directory with no entry created or removed since the launch (mtime) is not entered: the
        // whole of /tmp need not be walked at every checkpoint (6300 directories cost 75 ms here).
        struct stat sub_st;
        if (fstatat(dirfd, name, &sub_st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !at_or_after_launch(sub_st.st_mtim.tv_sec, sub_st.st_mtim.tv_nsec)) {
          // not entered
        } else if (depth + 1 > kMaxDepth) {
          stop(w, "deeper than 12 levels");
        } else {
          int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0) {
            walk(w, sub, depth + 1);
            close(sub);
            if (w.dir_done && w.rc == 0 && !w.stopped) w.rc = w.dir_done(w.ctx, dirfd, w.path, name);
          }
        }
      }
      w.path[base] = '\0';
      if (w.dirs > kMaxDirs) return;
    }
  }
}

}  // namespace

int files_walk_local(WalkFile file, void* ctx, bool skip_displaced, const char* lost, WalkFile dir_done) {
  static Walk w;
  w.file = file;
  w.dir_done = dir_done;
  w.ctx = ctx;
  w.lost = lost;
  w.skip_displaced = skip_displaced;
  w.dirs = 0;
  w.stopped = false;
  w.rc = 0;
  w.ckpt_dev = 0;
  w.ckpt_ino = 0;
  struct stat cst;
  const char* ck = inject::checkpoint_dir();
  if (ck && ck[0] && stat(ck, &cst) == 0) {
    w.ckpt_dev = cst.st_dev;
    w.ckpt_ino = cst.st_ino;
  }
  w.rec_dev = 0;
  w.rec_ino = 0;
  if (g_files.records[0] && stat(g_files.records, &cst) == 0) {
    w.rec_dev = cst.st_dev;
    w.rec_ino = cst.st_ino;
  }
  w.lvl_dev = 0;
  w.lvl_ino = 0;
  if (g_files.levels[0] && stat(g_files.levels, &cst) == 0) {
    w.lvl_dev = cst.st_dev;
    w.lvl_ino = cst.st_ino;
  }
  for (const char* d = g_files.local; *d && w.rc == 0;) {
    const char* e = strchr(d, ':');
    size_t n = e ? size_t(e - d) : strlen(d);
    while (n > 1 && d[n - 1] == '/') --n;
    if (n > 0 && n < sizeof w.path) {
      memcpy(w.path, d, n);
      w.path[n] = '\0';
      if (n == 1) w.path[0] = '\0';  // "/": children are "/name"
      int fd = open(n == 1 ? "/" : w.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) {
        walk(w, fd, 0);
        close(fd);
      }
    }
    if (!e) break;
    d = e + 1;
  }
  return w.rc;
}

int files_scan(Out& out) {
  Scan s{&out, geteuid(), false};
  // Read once per checkpoint; no log yet means nothing was created there (an empty log: nothing saved).
  s.by_log = !g_files.walk_birth && created_load() != CreatedLoad::kBad;
  int rc = files_walk_local(save_file, &s, false, "files below it that no process has open are not saved");
  created_unload();
  return rc;
}

}  // namespace revive::plugins
