/* Unix datagram sockets bound to autobound abstract names and connected to nobody, as UCX's shared-memory
 * transports use them to wake each other (sendto the peer's name): `dgram_wake ROUNDS PACE_US`. The parent
 * and a forked child each bind one; the parent sends "ping i" to the child's name until "pong i" comes back
 * from it (recvfrom: the child answers whatever name the ping came from), so a datagram lost at a
 * checkpoint only costs a resend; it prints one line per round (only the parent prints). After restart
 * both sockets must have their names again, or the pings go nowhere and the rounds stop. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net_util.h"

static int bound(struct sockaddr_un* a, socklen_t* len) {
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  sa_family_t fam = AF_UNIX;
  *len = sizeof *a;
  if (s < 0 || bind(s, (struct sockaddr*)&fam, sizeof fam) != 0 || getsockname(s, (struct sockaddr*)a, len) != 0)
    die("bind");
  return s;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long rounds = atol(argv[1]);
  unsigned pace_us = (unsigned)atoi(argv[2]);
  struct sockaddr_un pa, ca;
  socklen_t pl, cl;
  int ps = bound(&pa, &pl), cs = bound(&ca, &cl);
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    close(ps);
    for (;;) {
      char buf[64];
      struct sockaddr_un from;
      socklen_t fl = sizeof from;
      ssize_t n = recvfrom(cs, buf, sizeof buf - 1, 0, (struct sockaddr*)&from, &fl);
      if (n < 0) die("recvfrom");
      buf[n] = 0;
      long i;
      if (strcmp(buf, "quit") == 0) _exit(0);
      if (sscanf(buf, "ping %ld", &i) != 1) die("bad ping");
      char out[64];
      int m = snprintf(out, sizeof out, "pong %ld", i);
      if (sendto(cs, out, (size_t)m, 0, (struct sockaddr*)&from, fl) != m) die("sendto pong");
    }
  }
  close(cs);
  for (long i = 0; i < rounds; ++i) {
    char out[64], buf[64];
    int m = snprintf(out, sizeof out, "ping %ld", i);
    for (;;) {  // resend every 100 ms until this round's pong: a datagram may be lost at a checkpoint
      if (sendto(ps, out, (size_t)m, 0, (struct sockaddr*)&ca, cl) != m) die("sendto ping");
      struct pollfd p = {ps, POLLIN, 0};
      int got = 0;
      while (!got && poll(&p, 1, 100) == 1) {
        ssize_t n = recv(ps, buf, sizeof buf - 1, 0);
        if (n < 0) die("recv");
        buf[n] = 0;
        long j;
        got = sscanf(buf, "pong %ld", &j) == 1 && j == i;
      }
      if (got) break;
    }
    printf("round %ld\n", i);
    fflush(stdout);
    usleep(pace_us);
  }
  if (sendto(ps, "quit", 4, 0, (struct sockaddr*)&ca, cl) != 4) die("sendto quit");
  int st = 0;
  if (waitpid(child, &st, 0) != child) die("waitpid");
  printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}
