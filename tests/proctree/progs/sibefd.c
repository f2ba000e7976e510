/* An eventfd held by two siblings only: the parent makes it, forks a producer and a consumer, and closes
 * its own descriptor. The producer writes three tokens every ~20 ms (EFD_SEMAPHORE: one read takes one);
 * the consumer takes them one by one and prints each. No ancestor holds the description at a checkpoint:
 * the siblings find each other through the coordinator's keys (fd plugin, share_prefix), and the restart
 * must give both ONE eventfd; each its own (as before 2026-11-29) leaves the consumer waiting for ever.
 * Output: the consumer's "token N" lines and the parent's summary, deterministic. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void say(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  if (write(1, s, n) != (ssize_t)n) _exit(90);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  int tokens = eventfd(0, EFD_SEMAPHORE);
  if (tokens < 0) return 98;
  pid_t consumer = fork();
  if (consumer < 0) return 99;
  if (consumer == 0) {
    for (int i = 0; i < 3 * rounds; ++i) {
      uint64_t v;
      if (read(tokens, &v, 8) != 8 || v != 1) _exit(91);
      char line[64];
      snprintf(line, sizeof line, "token %d\n", i);
      say(line);
    }
    _exit(0);
  }
  pid_t producer = fork();
  if (producer < 0) return 97;
  if (producer == 0) {
    const struct timespec pause = {0, 20 * 1000 * 1000};
    for (int r = 0; r < rounds; ++r) {
      uint64_t three = 3;
      if (write(tokens, &three, 8) != 8) _exit(93);
      nanosleep(&pause, NULL);
    }
    _exit(0);
  }
  close(tokens);  /* the siblings alone hold it now */
  int sc = 0, sp = 0;
  if (waitpid(producer, &sp, 0) != producer || waitpid(consumer, &sc, 0) != consumer) return 95;
  char line[96];
  snprintf(line, sizeof line, "parent: %d rounds, producer status %d, consumer status %d\n", rounds, sp, sc);
  say(line);
  return 0;
}
