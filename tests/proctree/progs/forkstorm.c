/* Forks in a loop while checkpoints come at random moments: child i exits with i % 200 after 20 ms (even
 * i) or 1 ms (odd i); the parent forks child i+1 before reaping child i, so at almost any moment a live
 * child exists (an even one) and often a zombie (an odd one, while the parent waits for its elder even
 * sibling), sometimes a fork is in flight; it prints each status. A generation that missed a child would
 * make a waitpid fail after restart. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 300;
  setvbuf(stdout, NULL, _IOLBF, 0);
  pid_t prev = -1;
  for (int i = 0; i <= n; i++) {
    pid_t c = -1;
    if (i < n) {
      c = fork();
      if (c < 0) return 99;
      if (c == 0) {
        nap(i % 2 ? 1 : 20);
        _exit(i % 200);
      }
    }
    if (prev > 0) {
      int st = 0;
      if (waitpid(prev, &st, 0) != prev) printf("child %d: waitpid failed\n", i - 1);
      else printf("child %d exited %d\n", i - 1, WEXITSTATUS(st));
    }
    prev = c;
    nap(6);
  }
  return 0;
}
