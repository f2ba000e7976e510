/* A new pseudo-terminal pair for the channels' test programs: the master (not the caller's controlling
 * terminal), its slave's name in `name`. -1 on failure. */
#pragma once
#include <fcntl.h>
#include <stdlib.h>

static int open_pty_master(char* name, size_t cap) {
  int m = posix_openpt(O_RDWR | O_NOCTTY);
  if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name, cap) != 0) return -1;
  return m;
}
