/* Helpers shared by the process-tree test programs. */
#pragma once

#include <signal.h>
#include <time.h>

/* Sleeps ms milliseconds in all, across interruptions (a checkpoint signal may cut a nanosleep short). */
static inline void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* Waits for SIGUSR1 (blocked by the caller), across interruptions. */
static inline void wait_usr1(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  while (sigwaitinfo(&s, NULL) != SIGUSR1) {
  }
}
