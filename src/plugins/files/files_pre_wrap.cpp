// libc wrappers that keep pre-images (files_pre.cpp) of files about to be changed, beyond the open family
// and fopen (vpid_proc.cpp wraps those): creat, freopen, truncate, ftruncate, unlink, unlinkat, remove,
// rename, renameat, renameat2. glibc's creat, freopen and remove call open/unlink inside libc, where the
// open and unlink wrappers never see them, so each is wrapped itself.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/common/next_symbol.h"
#include "plugins/files/files_pre.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

using revive::plugins::pre_fd;
using revive::plugins::pre_fopen;
using revive::plugins::pre_path;

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

// Wrapper NAME(PARAMS): the pre-image hook BEFORE, then libc's NAME(ARGS).
#define PRE_CALL(ret, fail, name, params, args, before) VPID_WRAPPER(ret, fail, name, params, args, before)

namespace {
// rename's source keeps living under the new name (copied: a later change through that name would change
// a hard link too); the target it replaces goes away (one link: linked, nothing copied).
void pre_rename(int olddir, const char* oldpath, int newdir, const char* newpath, unsigned flags) {
  pre_path(olddir, oldpath, false, false);
  if (!(flags & RENAME_NOREPLACE)) pre_path(newdir, newpath, false, !(flags & RENAME_EXCHANGE));
}
}  // namespace

PRE_CALL(int, -1, creat, (const char* path, mode_t mode), (path, mode), pre_path(AT_FDCWD, path, true, false))
PRE_CALL(int, -1, creat64, (const char* path, mode_t mode), (path, mode), pre_path(AT_FDCWD, path, true, false))
PRE_CALL(FILE*, nullptr, freopen, (const char* path, const char* mode, FILE* s), (path, mode, s), pre_fopen(path, mode))
PRE_CALL(FILE*, nullptr, freopen64, (const char* path, const char* mode, FILE* s), (path, mode, s), pre_fopen(path, mode))
PRE_CALL(int, -1, truncate, (const char* path, off_t len), (path, len), pre_path(AT_FDCWD, path, true, false))
PRE_CALL(int, -1, truncate64, (const char* path, off64_t len), (path, len), pre_path(AT_FDCWD, path, true, false))
PRE_CALL(int, -1, ftruncate, (int fd, off_t len), (fd, len), pre_fd(fd))
PRE_CALL(int, -1, ftruncate64, (int fd, off64_t len), (fd, len), pre_fd(fd))
PRE_CALL(int, -1, unlink, (const char* path), (path), pre_path(AT_FDCWD, path, false, true))
PRE_CALL(int, -1, unlinkat, (int dir, const char* path, int flags), (dir, path, flags),
         if (!(flags & AT_REMOVEDIR)) pre_path(dir, path, false, true))
PRE_CALL(int, -1, remove, (const char* path), (path), pre_path(AT_FDCWD, path, false, true))
PRE_CALL(int, -1, rename, (const char* a, const char* b), (a, b), pre_rename(AT_FDCWD, a, AT_FDCWD, b, 0))
PRE_CALL(int, -1, renameat, (int da, const char* a, int db, const char* b), (da, a, db, b), pre_rename(da, a, db, b, 0))
PRE_CALL(int, -1, renameat2, (int da, const char* a, int db, const char* b, unsigned flags), (da, a, db, b, flags),
         pre_rename(da, a, db, b, flags))
