/* `dgram_wrap N`: N round trips of a UDP datagram a socket sends to itself (sendto + recvfrom on
 * 127.0.0.1), then N connect() calls of a UDP socket to that address; prints ns per round trip and per
 * connect. Run natively and under revive by dgram_wrap_bench.py: the cost of the library's sendto/recvfrom
 * and connect wrappers, which look up the datagram and port routes (chan_portmap.cpp) on every call. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0) return 1;
  socklen_t l = sizeof a;
  getsockname(s, (struct sockaddr*)&a, &l);
  char buf[64] = "ping";
  double t0 = now();
  for (long i = 0; i < n; ++i) {
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    if (sendto(s, buf, 16, 0, (struct sockaddr*)&a, sizeof a) != 16) return 2;
    if (recvfrom(s, buf, sizeof buf, 0, (struct sockaddr*)&from, &fl) != 16) return 3;
  }
  double t1 = now();
  int c = socket(AF_INET, SOCK_DGRAM, 0);
  for (long i = 0; i < n; ++i)
    if (connect(c, (struct sockaddr*)&a, sizeof a) != 0) return 4;
  double t2 = now();
  printf("%.1f %.1f\n", (t1 - t0) * 1e9 / (double)n, (t2 - t1) * 1e9 / (double)n);
  return 0;
}
