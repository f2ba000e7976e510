// The mkstemp family, for the creation log (created_log.h): glibc makes the file with an open inside libc
// (__gen_tempname), which no open wrapper sees -- gcc's driver makes /tmp/ccXXXX.s with mkstemps. The
// file is new whenever the call succeeds (O_EXCL); the template holds its name by then. tmpfile() is not
// here: its file is unlinked (O_TMPFILE), the fd plugin's. The fortified __open_2 family never creates
// (it refuses O_CREAT without a mode): nothing to record there. mknod/mknodat of a regular file (type
// S_IFREG or 0) make an empty file, new whenever the call succeeds (EEXIST otherwise). mkdir, mkdirat and
// mkdtemp (whose mkdir inside libc no wrapper sees) make a directory, new whenever they succeed: recorded as
// a directory, so the restore can move aside the ones the stopped run made after the checkpoint.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "plugins/common/next_symbol.h"
#include "plugins/files/created_log.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

#define TEMP_CALL(name, params, args) \
  VPID_WRAPPER_AFTER(int, -1, name, params, args, (void)0, revive::plugins::created_open(r, AT_FDCWD, tmpl, O_CREAT | O_EXCL, 0))

TEMP_CALL(mkstemp, (char* tmpl), (tmpl))
TEMP_CALL(mkstemp64, (char* tmpl), (tmpl))
TEMP_CALL(mkostemp, (char* tmpl, int flags), (tmpl, flags))
TEMP_CALL(mkostemp64, (char* tmpl, int flags), (tmpl, flags))
TEMP_CALL(mkstemps, (char* tmpl, int suffixlen), (tmpl, suffixlen))
TEMP_CALL(mkstemps64, (char* tmpl, int suffixlen), (tmpl, suffixlen))
TEMP_CALL(mkostemps, (char* tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags))
TEMP_CALL(mkostemps64, (char* tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags))

#define MKNOD_CALL(name, params, args, dir, path, mode)                                                      \
  VPID_WRAPPER_AFTER(int, -1, name, params, args, (void)0,                                                  \
                     if (r == 0 && (((mode) & S_IFMT) == 0 || ((mode) & S_IFMT) == S_IFREG))                \
                         revive::plugins::created_path(dir, path, true, 0))
MKNOD_CALL(mknod, (const char* path, mode_t mode, dev_t dev), (path, mode, dev), AT_FDCWD, path, mode)
MKNOD_CALL(mknodat, (int dir, const char* path, mode_t mode, dev_t dev), (dir, path, mode, dev), dir, path, mode)

VPID_WRAPPER_AFTER(int, -1, mkdir, (const char* path, mode_t mode), (path, mode), (void)0,
                   if (r == 0) revive::plugins::created_dir(AT_FDCWD, path))
VPID_WRAPPER_AFTER(int, -1, mkdirat, (int dir, const char* path, mode_t mode), (dir, path, mode), (void)0,
                   if (r == 0) revive::plugins::created_dir(dir, path))
VPID_WRAPPER_AFTER(char*, nullptr, mkdtemp, (char* tmpl), (tmpl), (void)0,
                   if (r) revive::plugins::created_dir(AT_FDCWD, r))
