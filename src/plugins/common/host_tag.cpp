// See host_tag.h.
#include "plugins/common/host_tag.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

namespace revive::plugins {

const char* host_tag() {
  static char tag[16];
  if (tag[0]) return tag;
  char b[40] = "";
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
  if (fd >= 0) close(fd);
  char id[sizeof tag];
  size_t k = 0;
  for (ssize_t i = 0; i < n && k < 8; ++i)
    if ((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f')) id[k++] = b[i];
  if (k == 0) id[k++] = '0';
  id[k] = 0;
  for (size_t i = k + 1; i-- > 0;) tag[i] = id[i];  // tag[0] last: complete before it reads as cached
  return tag;
}

}  // namespace revive::plugins
