/* A forking server: the parent forks NWORK workers, one every 60 ms; worker 0 works for 160 steps of
 * 30 ms, worker k>0 for (NWORK-k)*8, logging each step to its own file worker-K.txt (O_APPEND), so the
 * later ones finish first and wait as zombies while the parent reaps in order. Each exits with 10+k, the last one dies of SIGTERM; only
 * the parent prints to stdout (every status), so the output does not depend on scheduling. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

int main(int argc, char** argv) {
  int nwork = argc > 1 ? atoi(argv[1]) : 4;
  setvbuf(stdout, NULL, _IOLBF, 0);
  pid_t kids[64];
  for (int k = 0; k < nwork && k < 64; k++) {
    kids[k] = fork();
    if (kids[k] < 0) return 99;
    if (kids[k] == 0) {
      pid_t me = getpid();
      char name[32];
      snprintf(name, sizeof name, "worker-%d.txt", k);
      int fd = open(name, O_WRONLY | O_CREAT | O_APPEND, 0644);
      int steps = k == 0 ? 160 : (nwork - k) * 8;
      for (int i = 0; i < steps; i++) {
        dprintf(fd, "worker %d step %d\n", k, i);
        nap(30);
        if (getpid() != me) dprintf(fd, "worker %d: pid changed\n", k);
      }
      if (k == nwork - 1) raise(SIGTERM);
      return 10 + k;
    }
    printf("forked worker %d\n", k);
    nap(60);
  }
  for (int k = 0; k < nwork; k++) {
    int st = 0;
    pid_t w = waitpid(kids[k], &st, 0);
    if (w != kids[k]) printf("waitpid %d: wrong pid\n", k);
    else if (WIFEXITED(st)) printf("worker %d exited %d\n", k, WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) printf("worker %d killed by signal %d\n", k, WTERMSIG(st));
  }
  int st;
  printf("no more children: %s\n", waitpid(-1, &st, WNOHANG) < 0 ? "yes" : "no");
  return 0;
}
