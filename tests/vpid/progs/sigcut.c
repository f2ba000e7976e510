// A program signal delivered together with the checkpoint signal, to a handler that reads the sender's
// pid (SA_SIGINFO). tests/vpid/sigcut.py runs it: restarted once with virtual pids, the program makes a
// child whose kernel pid differs from the pid fork() gives it, blocks every signal (a raw
// rt_sigprocmask: the library's wrappers would keep the checkpoint signal deliverable), has the child
// sigqueue SIGUSR1 to it, and waits while the driver asks for a checkpoint; once the checkpoint signal is
// pending too, it unblocks both at once. The kernel then builds the SIGUSR1 frame first (lower number)
// and the checkpoint signal's on top, so the checkpoint is taken with the thread at the first instruction
// of the library's handler entry, the siginfo in hand holding the child's kernel pid of that incarnation.
// Restarted from there with virtual pids, the handler must still see the child's pid as fork() gave it
// (docs/process-trees.md "Ids in hand across a checkpoint").
//
// Gates: the driver creates DIR/A .. DIR/C when this program may go on. Root (own_child.h).
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>

#include "own_child.h"

static volatile sig_atomic_t g_got;
static volatile pid_t g_sender;

static void on_usr1(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)uc;
  g_sender = si->si_pid;
  g_got = 1;
}

// The child waits for a byte, sends SIGUSR1 with sigqueue to its parent, then waits for the pipe's end.
static int send_usr1(int rfd, void* arg) {
  const pid_t parent = *(const pid_t*)arg;
  char x;
  if (read(rfd, &x, 1) != 1) return 5;
  union sigval v = {.sival_int = 42};
  if (sigqueue(parent, SIGUSR1, v) != 0) return 6;
  while (read(rfd, &x, 1) > 0) {
  }
  return 0;
}

static uint64_t raw_pending(void) {
  uint64_t set = 0;
  syscall(SYS_rt_sigpending, &set, 8);
  return set;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sigcut GATE_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_usr1;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) return 3;
  printf("started\n");
  fflush(stdout);
  gate("A");  // meanwhile: a checkpoint, every process killed, a restart with virtual pids
  int wfd = -1;
  pid_t parent = getpid();
  pid_t child = own_child("sigcut", send_usr1, &parent, &wfd);
  if (child < 0) return 4;
  printf("child has a virtual pid of its own\n");
  fflush(stdout);
  uint64_t all = ~0ull, old = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8) != 0) return 3;
  if (write(wfd, "x", 1) != 1) return 3;  // the child sends SIGUSR1 now
  const struct timespec ms = {0, 1000 * 1000};
  for (int i = 0; !(raw_pending() & (1ull << (SIGUSR1 - 1))); ++i) {
    if (i > 10000) return 5;
    nanosleep(&ms, NULL);
  }
  printf("SIGUSR1 pending\n");
  fflush(stdout);
  gate("B");  // meanwhile the driver asks for a checkpoint and waits until its signal is pending here
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);  // both delivered now, the checkpoint's first
  if (!g_got) return 6;
  gate("C");  // meanwhile: every process killed, a restart with virtual pids
  const int same = g_sender == child;
  printf("the handler saw %s\n", same ? "the child's pid" : "ANOTHER PID");
  if (!same) fprintf(stderr, "sigcut: si_pid %d, fork gave %d\n", (int)g_sender, (int)child);
  fflush(stdout);
  close(wfd);
  int st = 0;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 7;
  return same ? 0 : 1;
}
