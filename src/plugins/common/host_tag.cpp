// See host_tag.h.
#include "plugins/common/host_tag.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "plugins/common/msg.h"

namespace revive::plugins {

namespace {

// The boot id's first 8 hex digits ("0" when unreadable) into id[9].
void boot8(char* id) {
  char b[40] = "";
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
  if (fd >= 0) close(fd);
  size_t k = 0;
  for (ssize_t i = 0; i < n && k < 8; ++i)
    if ((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f')) id[k++] = b[i];
  if (k == 0) id[k++] = '0';
  id[k] = 0;
}

}  // namespace

const char* host_tag() {
  static char tag[16];
  if (tag[0]) return tag;
  char id[sizeof tag];
  boot8(id);
  size_t k = 0;
  while (id[k]) ++k;
  for (size_t i = k + 1; i-- > 0;) tag[i] = id[i];  // tag[0] last: complete before it reads as cached
  return tag;
}

void host_now(char* out, size_t cap, const char* ns) {
  char id[16];
  boot8(id);
  char path[48];
  Msg(path, sizeof path).s("/proc/self/ns/").s(ns);
  struct stat st {};
  stat(path, &st);
  Msg(out, cap).s(id).s("-").u(uint64_t(st.st_ino));
}

}  // namespace revive::plugins
