/* squat PID: holds PID (a child created with clone3 set_tid sleeps in it) until killed, so a test can
 * check that `revive restart` refuses to recreate a tree whose pid is taken. Prints "ready" when set. */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  pid_t want = (pid_t)atoi(argv[1]);
  struct clone_args a;
  memset(&a, 0, sizeof a);
  a.exit_signal = SIGCHLD;
  a.set_tid = (uint64_t)(uintptr_t)&want;
  a.set_tid_size = 1;
  long r = syscall(SYS_clone3, &a, sizeof a);
  if (r < 0) {
    perror("clone3");
    return 1;
  }
  if (r == 0) {
    for (;;) pause();
  }
  printf("ready\n");
  fflush(stdout);
  waitpid((pid_t)r, NULL, 0);  /* killed with us: the driver kills the process group */
  return 0;
}
