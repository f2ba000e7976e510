// A parent that reaps a child with waitpid() while tests/vpid/waitcut.py holds it, under ptrace, right
// after the wait4 system call returned and before the library translated its result; a checkpoint is
// taken from exactly there, and the process restored from it (with virtual pids) must still report the
// child's pid as fork() gave it (docs/process-trees.md "Ids in hand across a checkpoint").
//
// Then a second child reaped by a wait that is blocked across a checkpoint and a restart (the kernel makes
// the call again in the restored process, whose ids its answer holds).
//
// Gates: the driver creates DIR/A, DIR/B, DIR/C, DIR/D when this program may go on. Run as root: it steers the
// kernel's next pid (ns_last_pid) so that the child's kernel pid is a virtual id in use, which gives the
// child a virtual id of its own (above 4194304); only then do the two incarnations' ids tell a wrong
// translation from a right one.
#include <stdlib.h>

#include "own_child.h"

struct exit_when { const char* gate_name; int code; };

// The child waits for its gate (or for the pipe's end when it has none), then exits with its code.
static int exit_when(int rfd, void* arg) {
  const struct exit_when* w = arg;
  char x;
  if (w->gate_name) gate(w->gate_name);
  else
    while (read(rfd, &x, 1) > 0) {
    }
  return w->code;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: waitcut GATE_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  printf("started\n");
  fflush(stdout);
  gate("A");  // meanwhile: a checkpoint, every process killed, a restart with virtual pids
  int wfd = -1;
  struct exit_when w7 = {NULL, 7};
  pid_t child = own_child("waitcut", exit_when, &w7, &wfd);
  if (child < 0) return 4;
  printf("child has a virtual pid of its own\n");
  fflush(stdout);
  close(wfd);  // the child exits
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) != 0) return 3;  // a zombie now, not reaped
  gate("B");  // meanwhile the driver attaches
  int st = 0;
  pid_t r = waitpid(-1, &st, 0);  // the driver stops us as this returns and has a checkpoint taken
  gate("C");  // meanwhile: every process killed, a restart with virtual pids
  int same = r == child;
  printf("waitpid gave %s, exit status %d\n", same ? "the child's pid" : "ANOTHER PID", WEXITSTATUS(st));
  if (!same) fprintf(stderr, "waitcut: waitpid gave %d, fork gave %d\n", (int)r, (int)child);
  // And the table no longer knows the child: a second wait has nothing to reap.
  errno = 0;
  pid_t again = waitpid(-1, &st, WNOHANG);
  printf("then waitpid gives %d (%s)\n", (int)again, again < 0 ? strerror(errno) : "");
  // A wait blocked across a checkpoint: restored at the system call, the kernel makes it again in the
  // new incarnation, whose ids its answer holds. The child exits once the driver opens gate D.
  struct exit_when w9 = {"D", 9};
  pid_t child2 = own_child("waitcut", exit_when, &w9, &wfd);
  if (child2 < 0) return 4;
  printf("second child has a virtual pid of its own\n");
  fflush(stdout);
  pid_t r2 = waitpid(-1, &st, 0);  // blocked here during a checkpoint and the restart
  int same2 = r2 == child2;
  printf("blocked waitpid gave %s, exit status %d\n", same2 ? "the child's pid" : "ANOTHER PID", WEXITSTATUS(st));
  if (!same2) fprintf(stderr, "waitcut: blocked waitpid gave %d, fork gave %d\n", (int)r2, (int)child2);
  return same && same2 ? 0 : 1;
}
