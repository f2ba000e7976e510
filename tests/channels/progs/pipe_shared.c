/* A pipe whose ends are held by two processes (issue 13, point 7): `pipe_shared N PACE_US [both]`.
 * The parent forks; the child keeps both ends open (as many real programs do) and writes N 32-byte
 * records, paced; the parent keeps the read end (with `both`, the write end too) and reads exactly N
 * records, printing a checksum line every 200. A read end silently replaced by /dev/null would end the
 * parent's reads early ("short read"); only the parent prints. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int read_full(int fd, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long n = atol(argv[1]);
  long pace_us = atol(argv[2]);
  int both = argc > 3 && strcmp(argv[3], "both") == 0;
  int p[2];
  if (pipe(p) != 0) return 3;
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 4;
  if (child == 0) {  // both ends stay open here
    char rec[32];
    for (long i = 0; i < n; ++i) {
      memset(rec, 0, sizeof rec);
      snprintf(rec, sizeof rec, "record %ld", i);
      if (write(p[1], rec, sizeof rec) != (ssize_t)sizeof rec) _exit(5);
      struct timespec ts = {0, pace_us * 1000};
      nanosleep(&ts, NULL);
    }
    _exit(0);
  }
  if (!both) close(p[1]);
  uint64_t h = 1469598103934665603ull;
  char rec[32], want[32];
  for (long i = 0; i < n; ++i) {
    if (read_full(p[0], rec, sizeof rec) != 0) {
      printf("short read at record %ld\n", i);
      return 1;
    }
    memset(want, 0, sizeof want);
    snprintf(want, sizeof want, "record %ld", i);
    if (memcmp(rec, want, sizeof rec) != 0) {
      printf("record %ld is wrong: '%.31s'\n", i, rec);
      return 1;
    }
    for (size_t k = 0; k < sizeof rec; ++k) h = (h ^ (uint8_t)rec[k]) * 1099511628211ull;
    if (i % 200 == 199) printf("%ld records h=%016llx\n", i + 1, (unsigned long long)h);
  }
  int st = 0;
  if (waitpid(child, &st, 0) != child) return 6;
  printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}
