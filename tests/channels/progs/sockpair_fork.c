/* A socketpair across fork: `sockpair_fork BYTES PACE_US [HOLDERS]`. The child (one end) checks the parent's
 * stream and echoes it; the parent (other end) streams BYTES on a second thread, checks the echo and prints
 * checksum lines, then reaps the child and prints its exit status (only the parent prints, so the output
 * does not depend on scheduling). With HOLDERS, that many more children inherit the parent's end (and the
 * parent holds it at a second number too) without ever using it, as MPICH's ranks inherit mpiexec's
 * sockets: one holder only may drain it. They leave when the parent closes a pipe. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net_util.h"

static int parent_end;
static unsigned pace_us;

static void* sender(void* arg) {
  (void)arg;
  send_stream(parent_end, 3, pace_us);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  total = strtoull(argv[1], NULL, 10);
  pace_us = (unsigned)atoi(argv[2]);
  pid_t child = fork_pair(SOCK_STREAM, &parent_end);
  if (child == 0) {
    check_stream(parent_end, "child", 3, 1);
    _exit(0);
  }
  int holders = argc > 3 ? atoi(argv[3]) : 0, quit[2];
  pid_t held[8];
  if (holders > 8 || pipe(quit) != 0) die("holders");
  int spare = holders ? dup(parent_end) : -1;
  for (int i = 0; i < holders; ++i) {
    held[i] = fork();
    if (held[i] < 0) die("fork");
    if (held[i] == 0) {
      close(quit[1]);
      char b;
      while (read(quit[0], &b, 1) > 0) {}
      _exit(10 + i);
    }
  }
  close(quit[0]);
  pthread_t t;
  pthread_create(&t, NULL, sender, NULL);
  check_stream(parent_end, "parent", 3, 0);
  pthread_join(t, NULL);
  close(quit[1]);
  int st = 0;
  if (waitpid(child, &st, 0) != child) die("waitpid");
  printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  for (int i = 0; i < holders; ++i) {
    if (waitpid(held[i], &st, 0) != held[i]) die("waitpid");
    printf("holder exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  if (spare >= 0) close(spare);
  return 0;
}
