// Listing a process's descriptors without allocation (getdents64 on /proc/<pid>/fd: opendir would
// malloc). Shared by the fd and files plugins.
#pragma once

#include <stdint.h>

namespace revive::plugins {

// Collects the open descriptor numbers (ascending) of /proc/<pid>/fd (pid 0: ourselves, without the
// descriptor listing them, and without descriptors a plugin owns: inject::fd_owned_by_plugin) into fds; returns the count, -EMFILE when more than cap, or -errno.
int list_fds(uint32_t pid, int* fds, int cap);

// One record of getdents64 (glibc declares no such type): for listing /proc directories without opendir.
struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

}  // namespace revive::plugins
