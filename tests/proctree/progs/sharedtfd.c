/* A timerfd shared across fork: the parent re-arms it each round (one-shot, round*60+30 s ahead, never
 * expiring during the run) and passes a token to its child over a pipe; the child reads the timer's
 * remaining time through its own descriptor of the same description and prints which round the parent
 * armed, then answers. Every 25 rounds the parent also arms it 1 ms ahead and the child reads the one
 * expiration (a blocking read of the shared timer). One open file description for both: a restart that
 * gave each process a timerfd of its own (as before 2026-11-29) shows the child a stale arming, or leaves
 * its read waiting for ever. Output deterministic: the child's "round N armed M" lines, the parent's total. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void put(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  if (write(1, s, n) != (ssize_t)n) _exit(90);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
  int down[2], up[2];
  if (tfd < 0 || pipe(down) != 0 || pipe(up) != 0) return 98;
  pid_t c = fork();
  if (c < 0) return 99;
  if (c == 0) {
    for (int r = 0; r < rounds; ++r) {
      char t;
      if (read(down[0], &t, 1) != 1) _exit(91);
      char line[80];
      if (t == 'e') {  /* the parent armed it to expire at once: read that expiration */
        uint64_t n;
        if (read(tfd, &n, 8) != 8 || n < 1) _exit(92);
        snprintf(line, sizeof line, "round %d expired\n", r);
      } else {
        struct itimerspec its;
        if (timerfd_gettime(tfd, &its) != 0) _exit(93);
        snprintf(line, sizeof line, "round %d armed %ld\n", r, (long)((its.it_value.tv_sec + 30) / 60));
      }
      put(line);
      if (write(up[1], "a", 1) != 1) _exit(94);
    }
    _exit(0);
  }
  const struct timespec pause = {0, 20 * 1000 * 1000};
  long total = 0;
  for (int r = 0; r < rounds; ++r) {
    struct itimerspec its = {{0, 0}, {r * 60 + 30, 0}};
    char t = 'g';
    if (r % 25 == 24) {
      its.it_value.tv_sec = 0;
      its.it_value.tv_nsec = 1000 * 1000;
      t = 'e';
    }
    if (timerfd_settime(tfd, 0, &its, NULL) != 0) return 95;
    if (write(down[1], &t, 1) != 1) return 96;
    char a;
    if (read(up[0], &a, 1) != 1) return 97;
    total += r;
    nanosleep(&pause, NULL);
  }
  int st = 0;
  if (waitpid(c, &st, 0) != c) return 89;
  char line[96];
  snprintf(line, sizeof line, "parent: %d rounds, total %ld, child status %d\n", rounds, total, st);
  put(line);
  return 0;
}
