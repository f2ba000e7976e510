/* until_file FILE: a parent and its child poll every millisecond for FILE and exit 0 when it exists.
 * bench/proctree/restart_ns.sh checkpoints it, creates FILE and times restarts: the restored tree ends
 * at once, so a restart's wall time is its own (command to program running again, plus its exit). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  pid_t c = fork();
  while (access(argv[1], F_OK) != 0) usleep(1000);
  if (c == 0) return 0;
  int st;
  waitpid(c, &st, 0);
  return 0;
}
