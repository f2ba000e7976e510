// A waitpid() blocked in the kernel, interrupted by a program signal whose handler (SA_RESTART) is running
// when the checkpoint is taken: the engine finds the thread inside the handler, not at the call; the kernel
// makes the call again when the handler returns. tests/vpid/handlercut.py restarts that checkpoint with
// virtual pids: the call's answer then holds the new incarnation's kernel pid, which must be read with
// the new incarnation's ids, and the program must get its child's pid as fork() gave it.
//
// The handler spins in user space (no system call) until a second thread, which waits for gate C, lets it
// go; SIGUSR1 is blocked in that thread, so the process-directed signal reaches the main thread.
// Gates: the driver creates DIR/A, DIR/C and DIR/D when this program may go on. Root (own_child.h).
#include <pthread.h>
#include <stdlib.h>

#include "own_child.h"

static volatile int g_release;

static void on_usr1(int sig) {
  (void)sig;
  static const char line[] = "in the handler\n";
  if (write(1, line, sizeof line - 1) < 0) _exit(9);
  while (!g_release) __builtin_ia32_pause();  // the checkpoint finds the thread here
}

static void* releaser(void* arg) {
  (void)arg;
  gate("C");  // meanwhile: a checkpoint, every process killed, a restart with virtual pids
  g_release = 1;
  return NULL;
}

// The child exits with 11 once the driver opens gate D.
static int exit_at_d(int rfd, void* arg) {
  (void)rfd;
  (void)arg;
  gate("D");
  return 11;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: handlercut GATE_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  setvbuf(stdout, NULL, _IONBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) return 3;
  printf("started\n");
  gate("A");  // meanwhile: a checkpoint, every process killed, a restart with virtual pids
  int wfd = -1;
  pid_t child = own_child("handlercut", exit_at_d, NULL, &wfd);
  if (child < 0) return 4;
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);  // the releaser inherits it
  pthread_t t;
  if (pthread_create(&t, NULL, releaser, NULL) != 0) return 3;
  pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
  printf("child has a virtual pid of its own\n");
  int st = 0;
  pid_t r = waitpid(-1, &st, 0);  // SIGUSR1's handler interrupts it; made again when the handler returns
  const int same = r == child;
  printf("waitpid gave %s, exit status %d\n", same ? "the child's pid" : "ANOTHER PID", WEXITSTATUS(st));
  if (!same) fprintf(stderr, "handlercut: waitpid gave %d, fork gave %d\n", (int)r, (int)child);
  pthread_join(t, NULL);
  close(wfd);
  return same ? 0 : 1;
}
