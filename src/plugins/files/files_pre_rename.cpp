// The renames log (preimage_record.h PreRename): the rename wrappers (files_pre_wrap.cpp) record, in the
// target generation's pre-image directory, every regular file a process of the computation renames after
// that generation's checkpoint, by identity and both absolute names. The restore moves the file aside
// from its new name (files_renamed.cpp renamed_logged) when an image saved it or it was born after the
// checkpoint: an open `log.txt` of the project directory renamed by `mv log.txt log-2.txt` after the
// checkpoint would otherwise stay beside the log.txt the restore writes back, which the walk of the
// node-local directories cannot see.
//
// Cost, only while a complete generation exists: per rename, three statx, two O_PATH opens with a readlink
// of /proc/self/fd (the absolute names), and an open + write + close of the log (not measured). Every
// regular file is recorded (the renaming process cannot tell cheaply whether an image holds it; the
// restore decides). Program threads, signal handlers too: raw system calls, stack buffers, errno kept.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>

#include "inject/sys.h"
#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/files_pre.h"
#include "plugins/files/preimage_record.h"
#include "plugins/plugins.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace revive::plugins {
namespace {

namespace sys = inject::sys;

struct KeepErrno {
  int e = errno;
  ~KeepErrno() { errno = e; }
};

// The regular file `path` (relative to dir) names, not following a last symlink: its identity and its
// absolute name (n: its length); false when it is not a regular file or its name cannot be had.
bool identify(int dir, const char* path, struct statx* sx, char* abs, size_t cap, size_t* n) {
  if (!path || !*path) return false;
  long fd = sys::sc(SYS_openat, dir, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  char self[40];
  Msg(self, sizeof self).s("/proc/self/fd/").i(int(fd));
  long got = sys::sc(SYS_readlinkat, AT_FDCWD, self, abs, cap - 1);
  bool ok = got > 1 && abs[0] == '/' &&
            sys::sc(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_INO | STATX_BTIME, sx) == 0 &&
            S_ISREG(sx->stx_mode);
  sys::sc(SYS_close, fd);
  if (!ok) return false;
  abs[got] = '\0';
  *n = size_t(got);
  // revive's own files (images, logs) are not the program's.
  const char* ck = inject::checkpoint_dir();
  return !(ck && ck[0] == '/' && files_under(abs, ck));
}

}  // namespace

void rename_from(RenameNote* n, int dir, const char* path, int to_dir, const char* to_path) {
  n->on = false;
  if (!pre_active()) return;
  KeepErrno k;
  struct statx sx;
  size_t len;
  if (!identify(dir, path, &sx, n->from, sizeof n->from, &len)) return;
  n->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  n->ino = sx.stx_ino;
  const bool bt = sx.stx_mask & STATX_BTIME;
  n->btime_sec = bt ? sx.stx_btime.tv_sec : 0;
  n->btime_nsec = bt ? sx.stx_btime.tv_nsec : 0;
  struct statx tx;
  n->replaces = to_path && sys::sc(SYS_statx, to_dir, to_path, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &tx) == 0;
  n->on = true;
}

void rename_to(RenameNote* n, int dir, const char* path) {
  const char* pre = pre_dir();
  if (!n->on || !pre) return;
  KeepErrno k;
  struct statx sx;
  char to[PATH_MAX];
  size_t to_len;
  if (!identify(dir, path, &sx, to, sizeof to, &to_len) || makedev(sx.stx_dev_major, sx.stx_dev_minor) != n->dev ||
      sx.stx_ino != n->ino)
    return;  // replaced meanwhile: not the file noted
  const size_t from_len = strnlen(n->from, sizeof n->from);
  PreRename r{};
  memcpy(r.magic, kPreRenameMagic, sizeof r.magic);
  r.dev = n->dev;
  r.ino = n->ino;
  r.btime_sec = n->btime_sec;
  r.btime_nsec = n->btime_nsec;
  r.from_len = uint32_t(from_len);
  r.to_len = uint32_t(to_len);
  r.flags = n->replaces ? kRenameReplaced : 0;
  r.size = uint32_t(sizeof r + from_len + to_len);
  XXH3_state_t h;  // over the three pieces, as the reader hashes the record it reads whole
  XXH3_64bits_reset(&h);
  XXH3_64bits_update(&h, &r, sizeof r);
  XXH3_64bits_update(&h, n->from, from_len);
  XXH3_64bits_update(&h, to, to_len);
  r.self_hash = XXH3_64bits_digest(&h);
  char log[1400];
  Msg(log, sizeof log).s(pre).s("/").s(kPreRenames);
  long fd = sys::sc(SYS_openat, AT_FDCWD, log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd == -ENOENT) {
    sys::sc(SYS_mkdirat, AT_FDCWD, pre, 0700);  // no pre-image kept yet in this generation
    fd = sys::sc(SYS_openat, AT_FDCWD, log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  }
  if (fd < 0) return;
  struct iovec v[3] = {{&r, sizeof r}, {n->from, from_len}, {to, to_len}};
  sys::sc(SYS_writev, fd, v, 3);  // one call: O_APPEND keeps concurrent records whole
  sys::sc(SYS_close, fd);
}

}  // namespace revive::plugins
