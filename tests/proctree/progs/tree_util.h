/* Helpers shared by the process-tree test programs. */
#pragma once

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

/* Sleeps ms milliseconds in all, across interruptions (a checkpoint signal may cut a nanosleep short). */
static inline void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* Blocks SIGUSR1, which the programs take with wait_usr1. */
static inline void block_usr1(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigprocmask(SIG_BLOCK, &s, NULL);
}

/* Waits for SIGUSR1 (blocked by the caller), across interruptions. */
static inline void wait_usr1(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  while (sigwaitinfo(&s, NULL) != SIGUSR1) {
  }
}

/* Waits for each of the n children in order and writes how it ended ("child K: reaped, exit S") to fd a
 * (unless -1), then to fd b. 0, or -1 on a short write. */
static inline int reap_kids(const pid_t* kids, int n, int a, int b) {
  for (int k = 0; k < n; k++) {
    int st = 0;
    pid_t w = waitpid(kids[k], &st, 0);
    char line[64];
    int len = snprintf(line, sizeof line, "child %d: %s, exit %d\n", k, w == kids[k] ? "reaped" : "lost",
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if ((a >= 0 && write(a, line, (size_t)len) != len) || write(b, line, (size_t)len) != len) return -1;
  }
  return 0;
}

/* The parent's end of the shared-description programs (sharedsfd, sharedepoll): reaps child c and writes
 * "parent: R rounds, child status S" to stdout. 0, or `fail` if the wait does not give c. */
static inline int reap_and_report(pid_t c, int rounds, int fail) {
  int st = 0;
  if (waitpid(c, &st, 0) != c) return fail;
  char line[64];
  int n = snprintf(line, sizeof line, "parent: %d rounds, child status %d\n", rounds, st);
  return write(1, line, (size_t)n) == n ? 0 : 90;
}
