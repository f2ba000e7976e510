/* Turns between a parent that reads a deleted file through its shared mapping and a child that uses a
 * descriptor of it (deleted_split.c, deleted_mapped.c): a copy apart after a restart shows as a turn
 * never seen. */
#pragma once
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The parent waits for the child's round i in its mapping (m[0] == i): 0, or after 10 s it prints the
 * loss, kills the child and returns 3. */
static int await_child(volatile long* m, long i, pid_t child) {
  for (long t0 = now_ms(); m[0] != i; nap(2))
    if (now_ms() - t0 > 10000) {
      printf("parent: lost the child at round %ld (sees %ld)\n", i, m[0]);
      kill(child, SIGKILL);
      return 3;
    }
  return 0;
}

/* Waits for the child and prints "done <its exit code>": the parent's exit code (0: the child's was 0). */
static int reap(pid_t child) {
  int st = 0;
  if (waitpid(child, &st, 0) != child) return perror("waitpid"), 1;
  printf("done %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 4;
}
