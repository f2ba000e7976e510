/* A pseudo-terminal pair inside the computation, as Open MPI's mpiexec gives each rank (issue 7):
 * `pty_pair N PACE_US`. The parent opens a pty and forks; the child's stdout is the slave and it writes N
 * numbered lines, paced; the parent reads the master only every 40 ms, so output written but not yet read
 * waits in the pair at any checkpoint, and prints every line it gets (the pty's \r dropped) and a
 * checksum at the end. A pair not rebuilt, or output lost or doubled at a checkpoint, changes the output. */
#include <errno.h>
#include <pty.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long n = atol(argv[1]);
  long pace_us = atol(argv[2]);
  int m, s;
  if (openpty(&m, &s, NULL, NULL, NULL) != 0) return 3;
  pid_t kid = fork();
  if (kid < 0) return 4;
  if (kid == 0) {
    close(m);
    dup2(s, 1);
    close(s);
    for (long i = 0; i < n; i++) {
      printf("line %ld of the child\n", i);
      fflush(stdout);
      struct timespec ts = {0, pace_us * 1000};
      nanosleep(&ts, NULL);
    }
    return 0;
  }
  close(s);
  uint64_t sum = 1469598103934665603ull;
  long lines = 0;
  char buf[4096];
  for (;;) {
    struct timespec ts = {0, 40 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ssize_t r = read(m, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // EIO: the slave is closed everywhere (the child ended)
    for (ssize_t k = 0; k < r; k++) {
      if (buf[k] == '\r') continue;
      sum = (sum ^ (uint8_t)buf[k]) * 1099511628211ull;
      putchar(buf[k]);
      if (buf[k] == '\n') lines++;
    }
    fflush(stdout);
  }
  int st = 0;
  waitpid(kid, &st, 0);
  printf("parent: %ld lines, checksum %016llx, child status %d\n", lines, (unsigned long long)sum, st);
  return lines == n ? 0 : 1;
}
