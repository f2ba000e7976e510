// libc wrappers that keep pre-images (files_pre.cpp) of files about to be changed, beyond the open family
// and fopen (vpid_proc.cpp wraps those): creat, freopen, truncate, ftruncate, unlink, unlinkat, remove,
// rename, renameat, renameat2; and the calls that change only a file's metadata (chmod, chown, utime...)
// or add a name to it (link): each moves its ctime, after which the file no longer looks unchanged since
// the checkpoint, so its pre-image is kept first (it restores mode and mtime too). glibc's creat,
// freopen, remove, utime, utimes, lutimes and futimes call open/unlink/utimensat inside libc, where the
// other wrappers never see them, so each is wrapped itself.
//
// A file opened O_APPEND after the checkpoint is kept by its size only (a cut-back record): the calls that
// change its existing bytes all the same are wrapped too, and make its copy first: pwritev2 with
// RWF_NOAPPEND, fallocate punching a hole or zeroing, collapsing or inserting a range, and shared writable
// mappings (files_pre_map.cpp). Not wrapped, because on an O_APPEND descriptor they only append or are
// refused (checked on Linux 6.18, tests/files/append_rewrite.c): pwrite/pwritev at an offset (Linux
// appends anyway, pwrite(2) BUGS), copy_file_range (EBADF), sendfile and splice into it (EINVAL), and
// posix_fallocate (allocates past the end only).
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utime.h>

#include "plugins/common/next_symbol.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_pre.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

using revive::plugins::created_fopen;
using revive::plugins::created_open;
using revive::plugins::created_path;
using revive::plugins::pre_fd;
using revive::plugins::pre_fopen;
using revive::plugins::pre_map;
using revive::plugins::pre_mapped;
using revive::plugins::pre_mprotect;
using revive::plugins::pre_path;
using revive::plugins::rename_from;
using revive::plugins::rename_to;

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

// Wrapper NAME(PARAMS): the pre-image hook BEFORE, then libc's NAME(ARGS).
#define PRE_CALL(ret, fail, name, params, args, before) VPID_WRAPPER(ret, fail, name, params, args, before)

namespace {
// rename's source keeps living under the new name, and the target it replaces goes away: both are kept
// (copies, as every pre-image).
void pre_rename(int olddir, const char* oldpath, int newdir, const char* newpath, unsigned flags) {
  pre_path(olddir, oldpath, false);
  if (!(flags & RENAME_NOREPLACE)) pre_path(newdir, newpath, false);
}
}  // namespace

// Calls that may create a file also tell the creation log (created_log.h) what they made: the clock is
// read before the call (a file born since is new).
#define CREATE_CALL(ret, fail, name, params, args, before, after) \
  VPID_WRAPPER_AFTER(ret, fail, name, params, args, before; const int64_t t = revive::plugins::created_clock(), after)
CREATE_CALL(int, -1, creat, (const char* path, mode_t mode), (path, mode), pre_path(AT_FDCWD, path, true),
            created_open(r, AT_FDCWD, path, O_CREAT, t))
CREATE_CALL(int, -1, creat64, (const char* path, mode_t mode), (path, mode), pre_path(AT_FDCWD, path, true),
            created_open(r, AT_FDCWD, path, O_CREAT, t))
CREATE_CALL(FILE*, nullptr, freopen, (const char* path, const char* mode, FILE* s), (path, mode, s),
            pre_fopen(path, mode), if (path) created_fopen(r, path, mode, t))
CREATE_CALL(FILE*, nullptr, freopen64, (const char* path, const char* mode, FILE* s), (path, mode, s),
            pre_fopen(path, mode), if (path) created_fopen(r, path, mode, t))
PRE_CALL(int, -1, truncate, (const char* path, off_t len), (path, len), pre_path(AT_FDCWD, path, true))
PRE_CALL(int, -1, truncate64, (const char* path, off64_t len), (path, len), pre_path(AT_FDCWD, path, true))
PRE_CALL(int, -1, ftruncate, (int fd, off_t len), (fd, len), pre_fd(fd))
PRE_CALL(int, -1, ftruncate64, (int fd, off64_t len), (fd, len), pre_fd(fd))
PRE_CALL(int, -1, unlink, (const char* path), (path), pre_path(AT_FDCWD, path, false))
PRE_CALL(int, -1, unlinkat, (int dir, const char* path, int flags), (dir, path, flags),
         if (!(flags & AT_REMOVEDIR)) pre_path(dir, path, false))
PRE_CALL(int, -1, remove, (const char* path), (path), pre_path(AT_FDCWD, path, false))
// A file renamed or linked into a node-local directory (made elsewhere on the same file system, where no
// record was written) is the computation's there too: recorded under its new name.
// Each renamed regular file also goes to the generation's renames log (files_pre_rename.cpp): the restore
// moves it aside from its new name when it should not be there at the checkpoint.
#define RENAME_CALL(name, params, args, da, a, db, b, flags)                                              \
  VPID_WRAPPER_AFTER(int, -1, name, params, args,                                                         \
                     pre_rename(da, a, db, b, flags); revive::plugins::RenameNote note; rename_from(&note, da, a, db, b), \
                     if (r == 0) {                                                                        \
                       created_path(db, b, true, 0);                                                      \
                       rename_to(&note, db, b);                                                           \
                     })
RENAME_CALL(rename, (const char* a, const char* b), (a, b), AT_FDCWD, a, AT_FDCWD, b, 0)
RENAME_CALL(renameat, (int da, const char* a, int db, const char* b), (da, a, db, b), da, a, db, b, 0)
RENAME_CALL(renameat2, (int da, const char* a, int db, const char* b, unsigned flags), (da, a, db, b, flags), da, a, db, b,
            flags)

// Metadata and names.
PRE_CALL(int, -1, chmod, (const char* path, mode_t mode), (path, mode), pre_path(AT_FDCWD, path, true))
PRE_CALL(int, -1, fchmod, (int fd, mode_t mode), (fd, mode), pre_fd(fd))
PRE_CALL(int, -1, fchmodat, (int dir, const char* path, mode_t mode, int flags), (dir, path, mode, flags),
         pre_path(dir, path, !(flags & AT_SYMLINK_NOFOLLOW)))
PRE_CALL(int, -1, chown, (const char* path, uid_t u, gid_t g), (path, u, g), pre_path(AT_FDCWD, path, true))
PRE_CALL(int, -1, lchown, (const char* path, uid_t u, gid_t g), (path, u, g), pre_path(AT_FDCWD, path, false))
PRE_CALL(int, -1, fchown, (int fd, uid_t u, gid_t g), (fd, u, g), pre_fd(fd))
PRE_CALL(int, -1, fchownat, (int dir, const char* path, uid_t u, gid_t g, int flags), (dir, path, u, g, flags),
         if (*path) pre_path(dir, path, !(flags & AT_SYMLINK_NOFOLLOW)); else pre_fd(dir))
PRE_CALL(int, -1, utime, (const char* path, const struct utimbuf* t), (path, t), pre_path(AT_FDCWD, path, true))
PRE_CALL(int, -1, utimes, (const char* path, const struct timeval* t), (path, t), pre_path(AT_FDCWD, path, true))
PRE_CALL(int, -1, lutimes, (const char* path, const struct timeval* t), (path, t), pre_path(AT_FDCWD, path, false))
PRE_CALL(int, -1, futimes, (int fd, const struct timeval* t), (fd, t), pre_fd(fd))
PRE_CALL(int, -1, futimens, (int fd, const struct timespec* t), (fd, t), pre_fd(fd))
PRE_CALL(int, -1, utimensat, (int dir, const char* path, const struct timespec* t, int flags), (dir, path, t, flags),
         pre_path(dir, path, !(flags & AT_SYMLINK_NOFOLLOW)))  // a null path (futimens' way) is skipped
VPID_WRAPPER_AFTER(int, -1, link, (const char* a, const char* b), (a, b), pre_path(AT_FDCWD, a, false),
                   if (r == 0) created_path(AT_FDCWD, b, true, 0))
VPID_WRAPPER_AFTER(int, -1, linkat, (int da, const char* a, int db, const char* b, int flags), (da, a, db, b, flags),
                   if (*a) pre_path(da, a, flags & AT_SYMLINK_FOLLOW); else pre_fd(da),
                   if (r == 0) created_path(db, b, true, 0))

// Changes of existing bytes through a descriptor that may be open O_APPEND (see the top).
constexpr int kFallocRewrites = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE;
PRE_CALL(ssize_t, -1, pwritev2, (int fd, const struct iovec* v, int n, off_t off, int flags), (fd, v, n, off, flags),
         if (flags & RWF_NOAPPEND) pre_fd(fd))
PRE_CALL(ssize_t, -1, pwritev64v2, (int fd, const struct iovec* v, int n, off64_t off, int flags), (fd, v, n, off, flags),
         if (flags & RWF_NOAPPEND) pre_fd(fd))
PRE_CALL(int, -1, fallocate, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len),
         if (mode & kFallocRewrites) pre_fd(fd))
PRE_CALL(int, -1, fallocate64, (int fd, int mode, off64_t off, off64_t len), (fd, mode, off, len),
         if (mode & kFallocRewrites) pre_fd(fd))
VPID_WRAPPER_AFTER(void*, MAP_FAILED, mmap, (void* a, size_t len, int prot, int flags, int fd, off_t off),
                   (a, len, prot, flags, fd, off), pre_map(fd, prot, flags), pre_mapped(r, len, fd, prot, flags))
VPID_WRAPPER_AFTER(void*, MAP_FAILED, mmap64, (void* a, size_t len, int prot, int flags, int fd, off64_t off),
                   (a, len, prot, flags, fd, off), pre_map(fd, prot, flags), pre_mapped(r, len, fd, prot, flags))
PRE_CALL(int, -1, mprotect, (void* a, size_t len, int prot), (a, len, prot), pre_mprotect(a, len, prot))
PRE_CALL(int, -1, pkey_mprotect, (void* a, size_t len, int prot, int key), (a, len, prot, key), pre_mprotect(a, len, prot))
