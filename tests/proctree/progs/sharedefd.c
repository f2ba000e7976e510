/* An eventfd shared across fork: the parent hands tokens to its child through it (EFD_SEMAPHORE: one
 * read takes one), three at a time every ~20 ms, while the child takes them one by one and prints each;
 * a second eventfd (plain counter, non-blocking) carries the child's acknowledgements back; tokens are often left
 * unread in the counter when a checkpoint comes. Each eventfd is ONE open file description for both
 * processes; a restart that gave each process its own (as before 2026-11-28) leaves the child waiting for
 * ever for tokens written into the parent's copy. Output: the child's "token N" lines, the parent's
 * totals, deterministic. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
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
  int tokens = eventfd(0, EFD_SEMAPHORE), acks = eventfd(0, EFD_NONBLOCK);
  if (tokens < 0 || acks < 0) return 98;
  pid_t c = fork();
  if (c < 0) return 99;
  if (c == 0) {
    for (int i = 0; i < 3 * rounds; ++i) {
      uint64_t v;
      if (read(tokens, &v, 8) != 8 || v != 1) _exit(91);
      char line[64];
      snprintf(line, sizeof line, "token %d\n", i);
      put(line);
      if (i % 3 == 2) {
        uint64_t one = 1;
        if (write(acks, &one, 8) != 8) _exit(92);
      }
    }
    _exit(0);
  }
  const struct timespec pause = {0, 20 * 1000 * 1000};
  uint64_t acked = 0;
  for (int r = 0; r < rounds; ++r) {
    uint64_t three = 3;
    if (write(tokens, &three, 8) != 8) return 93;
    nanosleep(&pause, NULL);
    if (r % 10 == 9) {  // the acknowledgements so far, all at once (the counter is read whole; none yet: EAGAIN)
      uint64_t v;
      if (read(acks, &v, 8) == 8) acked += v;
    }
  }
  int st = 0;
  if (waitpid(c, &st, 0) != c) return 95;
  uint64_t v = 0;
  if (read(acks, &v, 8) == 8) acked += v;  // the rest (the child has acknowledged every token)
  char line[96];
  snprintf(line, sizeof line, "parent: %d rounds, %llu acknowledgements, child status %d\n", rounds,
           (unsigned long long)acked, st);
  put(line);
  return 0;
}
