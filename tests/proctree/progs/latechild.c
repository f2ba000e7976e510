/* A fork child that lives on without forking, exec'ing or being checkpointed: it must still join the
 * coordinator on its own soon (docs/process-trees.md "Lazy join"), or `revive kill`, `revive status` and
 * an exiting parent's coordinator would not know it. `latechild wait MS`: the parent waits for it
 * (the parent's join timer pokes it at 30 ms); `latechild kill MS`: the parent SIGKILLs itself once the
 * child is running, well before 30 ms (its death is the child's wake-up: its join timer dies with it).
 * The child writes child.pid, sleeps MS, exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tree_util.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int kill_self = strcmp(argv[1], "kill") == 0;
  const long ms = atol(argv[2]);
  pid_t c = fork();
  if (c < 0) return 99;
  if (c == 0) {
    FILE* f = fopen("child.pid.tmp", "w");
    if (!f) _exit(98);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    rename("child.pid.tmp", "child.pid");
    nap(ms);
    _exit(0);
  }
  if (kill_self) {
    while (access("child.pid", F_OK) != 0) nap(1);
    nap(5);
    raise(SIGKILL);
  }
  int st = 0;
  return waitpid(c, &st, 0) == c && WIFEXITED(st) ? WEXITSTATUS(st) : 97;
}
