// What the engine provides to the plugins, for tests: the checkpoint signal (the real one reads
// REVIVE_SIGNAL), the count of its interruptions of the calling thread, and the engine's reserved descriptor (REVIVE_TEST_RESERVED_FD names one, to test that
// the fd plugin neither saves nor overwrites it).
#include <signal.h>
#include <stdlib.h>

#include "plugins/plugins.h"

namespace revive::inject {

int checkpoint_signal() { return SIGRTMAX - 2; }

// The engine counts, per thread, its signals' interruptions (quiesce.cpp); a test's stand-in engine handler
// bumps this one.
__thread uint32_t t_stub_interruptions;
uint32_t checkpoint_interruptions() { return t_stub_interruptions; }

bool fd_reserved(int fd) {
  static int reserved = [] {
    const char* s = getenv("REVIVE_TEST_RESERVED_FD");
    return s ? atoi(s) : -1;
  }();
  return fd == reserved;
}

}  // namespace revive::inject
