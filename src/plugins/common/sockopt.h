// An integer socket option, shared by the plugins that look at sockets (chan, fd).
#pragma once

#include <sys/socket.h>

namespace revive::plugins {

// getsockopt of an int-valued option: its value, or -1 when it cannot be read.
inline int int_opt(int fd, int level, int name) {
  int v = 0;
  socklen_t l = sizeof v;
  return getsockopt(fd, level, name, &v, &l) == 0 ? v : -1;
}

}  // namespace revive::plugins
