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
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* g_dir;

static void gate(const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  struct stat st;
  const struct timespec ts = {0, 10 * 1000 * 1000};
  while (stat(path, &st) != 0) nanosleep(&ts, NULL);
}

static int steer_next_pid(pid_t next) {
  int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
  if (fd < 0) return -1;
  char b[32];
  int n = snprintf(b, sizeof b, "%d", (int)next - 1);
  int ok = write(fd, b, (size_t)n) == n;
  close(fd);
  return ok ? 0 : -1;
}

// A child whose kernel pid is a virtual id in use (ours, from before the restart): it gets a fresh one.
// The child waits for `gate_name` (or for the pipe's end when it is NULL), then exits with `code`.
static pid_t own_child(const char* gate_name, int code, int* wfd) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    if (steer_next_pid(getpid()) != 0) {
      fprintf(stderr, "waitcut: cannot write /proc/sys/kernel/ns_last_pid: %s\n", strerror(errno));
      return -1;
    }
    pid_t c = fork();
    if (c < 0) return -1;
    if (c == 0) {
      char x;
      close(fds[1]);
      if (gate_name) gate(gate_name);
      else
        while (read(fds[0], &x, 1) > 0) {
        }
      _exit(code);
    }
    close(fds[0]);
    if (c > 4194304) {
      *wfd = fds[1];
      return c;
    }
    close(fds[1]);  // its kernel pid was not ours (another process took it first): again
    int st;
    kill(c, SIGKILL);
    if (waitpid(c, &st, 0) != c) return -1;
  }
  fprintf(stderr, "waitcut: no child got a virtual pid of its own in 50 attempts\n");
  return -1;
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
  pid_t child = own_child(NULL, 7, &wfd);
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
  pid_t child2 = own_child("D", 9, &wfd);
  if (child2 < 0) return 4;
  printf("second child has a virtual pid of its own\n");
  fflush(stdout);
  pid_t r2 = waitpid(-1, &st, 0);  // blocked here during a checkpoint and the restart
  int same2 = r2 == child2;
  printf("blocked waitpid gave %s, exit status %d\n", same2 ? "the child's pid" : "ANOTHER PID", WEXITSTATUS(st));
  if (!same2) fprintf(stderr, "waitcut: blocked waitpid gave %d, fork gave %d\n", (int)r2, (int)child2);
  return same && same2 ? 0 : 1;
}
