/* Parent and child signal each other ROUNDS times (kill + sigwaitinfo), each checking that its own pid
 * and its partner's stay what they were at the start (a restart must recreate them). The child leads a
 * session of its own (setsid), and the parent signals it through its process group (kill(-pgid)), so
 * groups and sessions must come back too. The child exits with 7; the parent reaps it with waitpid and
 * prints the status. Output: stdout (line buffered). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 150;
  setvbuf(stdout, NULL, _IOLBF, 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigprocmask(SIG_BLOCK, &s, NULL);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) return 99;
  if (child == 0) {
    pid_t me = getpid();
    if (setsid() != me) printf("child: setsid failed\n");
    for (int i = 0; i < rounds; i++) {
      wait_usr1();
      if (getpid() != me || getppid() != parent) printf("child: pid changed at round %d\n", i);
      if (getsid(0) != me || getpgrp() != me) printf("child: session/group changed at round %d\n", i);
      printf("child %d\n", i);
      nap(8);
      kill(parent, SIGUSR1);
    }
    return 7;
  }
  while (getpgid(child) != child) nap(1); /* until the child's setsid */
  for (int i = 0; i < rounds; i++) {
    if (kill(-child, SIGUSR1) != 0) printf("parent: no process group %d at round %d\n", (int)child, i);
    wait_usr1();
    if (getpid() != parent) printf("parent: pid changed at round %d\n", i);
    printf("parent %d\n", i);
    nap(8);
  }
  int st = 0;
  pid_t w = waitpid(child, &st, 0);
  printf("reaped %s status %d\n", w == child ? "child" : "something else", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 3;
}
