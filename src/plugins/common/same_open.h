// Whether descriptor `fd` of ours is the regular file at `path`, opened with the same access mode and
// O_APPEND as `flags`: then a restored descriptor saved with those flags may share fd's open file
// description instead of a new one (`revive run ... >job.log 2>&1`: the job and the supervisor keep one
// offset). Used by the fd plugin (a process's own fd 0/1/2) and by proctree's restart (a description
// several processes share). Plain system calls: fine in restore context.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

namespace revive::plugins {

inline bool same_open_file(int fd, const char* path, int flags) {
  struct stat ours, theirs;
  if (fstat(fd, &ours) != 0 || !S_ISREG(ours.st_mode) || stat(path, &theirs) != 0 || ours.st_dev != theirs.st_dev ||
      ours.st_ino != theirs.st_ino)
    return false;
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_ACCMODE) == (flags & O_ACCMODE) && (fl & O_APPEND) == (flags & O_APPEND);
}

}  // namespace revive::plugins
