// What the engine provides to the plugins, for tests: the checkpoint signal (the real one reads
// REVIVE_SIGNAL) and the engine's reserved descriptor (REVIVE_TEST_RESERVED_FD names one, to test that
// the fd plugin neither saves nor overwrites it).
#include <signal.h>
#include <stdlib.h>

#include "plugins/plugins.h"

namespace revive::inject {

int checkpoint_signal() { return SIGRTMAX - 2; }

bool fd_reserved(int fd) {
  static int reserved = [] {
    const char* s = getenv("REVIVE_TEST_RESERVED_FD");
    return s ? atoi(s) : -1;
  }();
  return fd == reserved;
}

}  // namespace revive::inject
