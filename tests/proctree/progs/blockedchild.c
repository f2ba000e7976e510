/* A fork child that blocks every signal (raw rt_sigprocmask: the signal plugin would keep the engine's
 * unblocked) and sleeps 600 ms right after fork, then writes a line and exits; the parent waits for each
 * of n children in turn. It cannot join lazily while it sleeps: a checkpoint then waits for it (its poke
 * is delivered once it unblocks) or is refused and taken again, never taken without it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 0; i < n; i++) {
    pid_t c = fork();
    if (c < 0) return 99;
    if (c == 0) {
      unsigned long long all = ~0ull, old = 0;
      syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
      struct timespec ts = {0, 600 * 1000000L};
      while (syscall(SYS_nanosleep, &ts, &ts) != 0) {
      }
      syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
      printf("child %d slept with every signal blocked\n", i);
      _exit(i);
    }
    int st = 0;
    if (waitpid(c, &st, 0) != c) printf("child %d: waitpid failed\n", i);
    else printf("child %d exited %d\n", i, WEXITSTATUS(st));
  }
  return 0;
}
