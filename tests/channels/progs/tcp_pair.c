/* TCP pair for the channels tests and bench: `tcp_pair server PORT BYTES [PACE_US]` listens on
 * 127.0.0.1:PORT, accepts one client and echoes everything it receives; `tcp_pair client PORT BYTES
 * [PACE_US]` connects, streams BYTES of a deterministic pseudo-random sequence in chunks of varying size
 * (PACE_US microseconds of sleep after each 64 KiB chunk: 0 = full speed) while reading the echo back
 * on a second thread, and checks every echoed byte. Both print a checksum line at every MiB and at the
 * end, so the output of a run is the same however it was checkpointed, killed and restarted. After the
 * stream the client connects a second time ("bye") and the server must accept it on the same listening
 * socket: listening survives a restart. Any mismatch or error exits 1 with a message. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net_util.h"

static unsigned pace_us;

static void* sender(void* arg) {
  send_stream(*(int*)arg, 0, pace_us);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tcp_pair server|client PORT BYTES [PACE_US]\n");
    return 2;
  }
  int port = atoi(argv[2]);
  total = strtoull(argv[3], NULL, 10);
  pace_us = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
  if (strcmp(argv[1], "server") == 0) {
    int l = listen_loopback(port, 8);
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    check_stream(s, "server", 0, 1);
    int s2 = accept(l, NULL, NULL);
    if (s2 < 0) die("second accept");
    char bye[4] = {0};
    for (int got = 0; got < 3;) {
      int r = read_some(s2, (uint8_t*)bye + got, (size_t)(3 - got));
      if (r == 0) die("second connection closed early");
      got += r;
    }
    printf("server second connection: %s\n", bye);
    return 0;
  }
  int s = connect_loopback(port);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t t;
  pthread_create(&t, NULL, sender, &s);
  check_stream(s, "client", 0, 0);
  pthread_join(t, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (getenv("TCP_PAIR_TIMING")) /* for bench/channels: stderr, so stdout stays comparable */
    fprintf(stderr, "stream_seconds %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
  int s2 = connect_loopback(port);
  write_all(s2, (const uint8_t*)"bye", 3);
  printf("client said bye\n");
  return 0;
}
