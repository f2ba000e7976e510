/* Unix-socket ring for the channels tests: `unix_ring DIR N I BYTES [PACE_US]` is member I of N. It
 * listens on DIR/r.I, connects to DIR/r.(I+1)%N, accepts its predecessor, then streams BYTES of sequence
 * I to its successor (second thread, PACE_US microseconds of sleep per chunk) while checking sequence
 * (I-1+N)%N from its predecessor. Prints checksum lines (stream_util.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "stream_util.h"

static unsigned pace_us;
static int me, next_fd;

static struct sockaddr_un path(const char* dir, int i) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s/r.%d", dir, i);
  return a;
}

static void* sender(void* arg) {
  (void)arg;
  send_stream(next_fd, (uint64_t)me, pace_us);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: unix_ring DIR N I BYTES [PACE_US]\n");
    return 2;
  }
  int n = atoi(argv[2]);
  me = atoi(argv[3]);
  total = strtoull(argv[4], NULL, 10);
  pace_us = argc > 5 ? (unsigned)atoi(argv[5]) : 0;
  struct sockaddr_un mine = path(argv[1], me), next = path(argv[1], (me + 1) % n);
  unlink(mine.sun_path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr*)&mine, sizeof mine) != 0 || listen(l, 4) != 0) die("listen");
  for (int tries = 0;; ++tries) {
    next_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(next_fd, (struct sockaddr*)&next, sizeof next) == 0) break;
    close(next_fd);
    if (tries > 500) die("connect to the next member");
    usleep(20000);
  }
  int prev = accept(l, NULL, NULL);
  if (prev < 0) die("accept");
  char who[32];
  snprintf(who, sizeof who, "member %d", me);
  pthread_t t;
  pthread_create(&t, NULL, sender, NULL);
  check_stream(prev, who, (uint64_t)((me + n - 1) % n), 0);
  pthread_join(t, NULL);
  return 0;
}
