/* A daemonizing program: the launched process forks and _exits at once; its child, the daemon, writes
 * daemon.pid, then n lines to stdout 40 ms apart, then creates "finished". Under `revive launch` the
 * child is unjoined when its parent leaves: the parent must let it join first, or the coordinator sees
 * the computation empty (and ends) and checkpoints go without the daemon (daemon_test.py). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tree_util.h"

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 60;
  pid_t c = fork();
  if (c < 0) return 99;
  if (c > 0) _exit(0);
  setvbuf(stdout, NULL, _IOLBF, 0);
  FILE* f = fopen("daemon.pid.tmp", "w");
  if (!f) return 98;
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  rename("daemon.pid.tmp", "daemon.pid");
  for (int i = 0; i < n; i++) {
    printf("daemon line %d\n", i);
    nap(40);
  }
  int fd = open("finished", O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) close(fd);
  return 0;
}
