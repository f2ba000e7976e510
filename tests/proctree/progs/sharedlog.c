/* A parent and KIDS children write interleaved lines through descriptors they share, in turn (kill +
 * sigwaitinfo): shared.txt, opened once by the parent without O_APPEND before the forks, and stdout
 * (the test opens it without O_APPEND too). Each of those is ONE open file description with one offset
 * for every process; if a restart gave each process a description of its own, their writes would land on
 * each other and the files would differ from an uninterrupted run's. write(2) only, no stdio buffers.
 * Children exit with 10+i; the parent reaps them in order and prints the statuses.
 * With a second argument "siblings" the parent closes shared.txt once the children exist and only they
 * write to it: a description held by siblings whose common ancestor no longer holds it. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

enum { KIDS = 3 };

static void put(int fd, const char* who, int i, int round) {
  char line[96];
  int n = snprintf(line, sizeof line, "%s %d round %d\n", who, i, round);
  if (write(fd, line, (size_t)n) != n) _exit(90);
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 600;
  int siblings = argc > 2 && strcmp(argv[2], "siblings") == 0;
  int log = open("shared.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return 98;
  block_usr1();
  pid_t parent = getpid(), kids[KIDS];
  for (int k = 0; k < KIDS; k++) {
    kids[k] = fork();
    if (kids[k] < 0) return 99;
    if (kids[k] == 0) {
      for (int r = 0; r < rounds; r++) {
        wait_usr1();
        put(log, "child", k, r);
        put(1, "child", k, r);
        kill(parent, SIGUSR1);
      }
      return 10 + k;
    }
  }
  if (siblings) close(log);
  for (int r = 0; r < rounds; r++) {
    if (!siblings) put(log, "parent", 0, r);
    put(1, "parent", 0, r);
    for (int k = 0; k < KIDS; k++) {
      kill(kids[k], SIGUSR1);
      wait_usr1();
    }
    nap(8);
  }
  if (reap_kids(kids, KIDS, siblings ? -1 : log, 1) != 0) return 97;
  return 0;
}
