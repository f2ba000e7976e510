/* fork_loop GATE ROUNDS N: the fork+_exit+waitpid loop of a program that was checkpointed and restarted
 * (bench/vpid/restart_fork.py). Prints "started", waits until the file GATE exists (the checkpoint,
 * kill and restart happen meanwhile), then ROUNDS rounds of N forks, one line per round with the mean
 * microseconds per fork+_exit+waitpid and the page faults per fork of this process and of its children,
 * then "pid P" (getpid(): the virtual pid after a restart with a
 * table). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: fork_loop GATE ROUNDS N\n");
    return 2;
  }
  const int rounds = atoi(argv[2]), n = atoi(argv[3]);
  printf("started\n");
  fflush(stdout);
  struct stat st;
  const struct timespec tick = {0, 5 * 1000 * 1000};
  while (stat(argv[1], &st) != 0) nanosleep(&tick, NULL);
  for (int r = 0; r < rounds; ++r) {
    struct rusage s0, c0, s1, c1;
    getrusage(RUSAGE_SELF, &s0);
    getrusage(RUSAGE_CHILDREN, &c0);
    const double t0 = now_us();
    for (int i = 0; i < n; ++i) {
      pid_t c = fork();
      if (c < 0) return perror("fork"), 1;
      if (c == 0) _exit(0);
      int s;
      if (waitpid(c, &s, 0) != c || !WIFEXITED(s)) return perror("waitpid"), 1;
    }
    const double us = (now_us() - t0) / n;
    getrusage(RUSAGE_SELF, &s1);
    getrusage(RUSAGE_CHILDREN, &c1);
    printf("%.1f %.2f %.2f\n", us, (double)(s1.ru_minflt - s0.ru_minflt) / n,
           (double)(c1.ru_minflt - c0.ru_minflt) / n);
  }
  printf("pid %d\n", (int)getpid());
  return 0;
}
