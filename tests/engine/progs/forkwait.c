/* A program that is half of the time between a fork() and its waitpid(): each step forks a child that
 * lives 30 ms and exits with a status of its own, the parent checks that status, then works 30 ms alone. A standalone
 * checkpoint (no coordinator) restores this process alone, so one taken while the child exists would
 * come back to a waitpid() that fails with ECHILD; the engine defers it until no child exists.
 * `forkwait STEPS [MS]`: MS (default 30) is the child's life and the parent's time alone per step; the
 * output does not depend on it, so a reference run can use 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long steps = argc > 1 ? atol(argv[1]) : 60;
  long ms = argc > 2 ? atol(argv[2]) : 30;
  uint64_t h = 1469598103934665603ull;
  for (long i = 0; i < steps; ++i) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      printf("step %ld: fork failed\n", i);
      return 1;
    }
    if (pid == 0) {
      struct timespec ts = {0, ms * 1000 * 1000};
      nanosleep(&ts, NULL);
      _exit((int)(i % 97));
    }
    for (int k = 0; k < 100000; ++k) h = (h ^ (uint64_t)(i * 31 + k)) * 1099511628211ull;
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != (int)(i % 97)) {
      printf("step %ld: waitpid failed\n", i);
      return 1;
    }
    printf("step %ld child status %d h=%016llx\n", i, WEXITSTATUS(st), (unsigned long long)h);
    struct timespec alone = {0, ms * 1000 * 1000};
    nanosleep(&alone, NULL);
  }
  printf("done h=%016llx\n", (unsigned long long)h);
  return 0;
}
