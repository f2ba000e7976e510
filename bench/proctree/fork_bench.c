/* fork_bench [N] [ROUNDS]: median time of fork() + child _exit(0) + waitpid, per fork, over ROUNDS rounds
 * of N forks. Run natively (the physical limit) and under `revive launch` (each child joins the
 * computation before fork returns: a coordinator round trip and a new checkpoint thread). run.sh does both. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 50, rounds = argc > 2 ? atoi(argv[2]) : 7;
  double t[64];
  if (rounds > 64) rounds = 64;
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int i = 0; i < n; i++) {
      pid_t p = fork();
      if (p == 0) _exit(0);
      if (p < 0) return 1;
      waitpid(p, NULL, 0);
    }
    t[r] = (now() - t0) / n;
  }
  qsort(t, (size_t)rounds, sizeof t[0], cmp);
  printf("%.1f\n", t[rounds / 2] * 1e6);
  return 0;
}
