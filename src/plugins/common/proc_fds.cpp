#include "plugins/common/proc_fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/plugins.h"

namespace revive::inject {
// Weak default (no plugin owns descriptors); the verbs plugin's definition replaces it.
__attribute__((weak)) bool fd_owned_by_plugin(int) { return false; }
// Weak default (no node-local directories known); the files plugin's definition replaces it.
__attribute__((weak)) bool node_local_path(const char*) { return false; }
}  // namespace revive::inject

namespace revive::plugins {

int list_fds(uint32_t pid, int* fds, int cap) {
  char path[48];
  if (pid == 0) Msg(path, sizeof path).s("/proc/self/fd");
  else Msg(path, sizeof path).s("/proc/").u(pid).s("/fd");
  // Kernel pids: the raw call, which no virtual-pid wrapper translates (plugins/vpid).
  int dir = int(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return -errno;
  int n = 0;
  alignas(8) char buf[4096];
  for (;;) {
    long got = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (got < 0) {
      int e = errno;
      close(dir);
      return -e;
    }
    if (got == 0) break;
    for (long pos = 0; pos < got;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + pos);
      pos += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      int fd = 0;
      for (const char* c = d->d_name; *c; ++c) fd = fd * 10 + (*c - '0');
      if (pid == 0 && (fd == dir || inject::fd_owned_by_plugin(fd))) continue;
      if (n == cap) {
        close(dir);
        return -EMFILE;
      }
      fds[n++] = fd;
    }
  }
  close(dir);
  // getdents order is not numeric: insertion sort (few hundred fds at most in practice).
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && fds[j - 1] > fds[j]; --j) {
      int t = fds[j];
      fds[j] = fds[j - 1];
      fds[j - 1] = t;
    }
  return n;
}

}  // namespace revive::plugins
