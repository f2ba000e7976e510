/* A socketpair across fork: `sockpair_fork BYTES PACE_US`. The child (one end) checks the parent's stream
 * and echoes it; the parent (other end) streams BYTES on a second thread, checks the echo and prints
 * checksum lines, then reaps the child and prints its exit status (only the parent prints, so the output
 * does not depend on scheduling). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

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
  pthread_t t;
  pthread_create(&t, NULL, sender, NULL);
  check_stream(parent_end, "parent", 3, 0);
  pthread_join(t, NULL);
  int st = 0;
  if (waitpid(child, &st, 0) != child) die("waitpid");
  printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}
