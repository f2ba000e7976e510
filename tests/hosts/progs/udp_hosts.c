/* A UDP request/response pair that can span hosts, as a resolver and its server: `udp_hosts userver PORT N
 * PACE_US` binds the wildcard address and answers each request at the address it came from (recvfrom,
 * sendto), until it has answered N distinct ones (then answers repeats for 1 s more); `udp_hosts uclient
 * ADDR PORT N PACE_US` sends N requests to ADDR:PORT with sendto, each sent again after 300 ms without an
 * answer, and takes an answer only from the address it sent to, as a resolver does: one from elsewhere is
 * reported and ends it (exit 4). Restarted on swapped hosts the client still sends to the server's OLD
 * address, and must get the answers from it: the channels plugin's datagram routes. Every 50 requests the
 * client execs itself to go on (`... uclient ADDR PORT N PACE_US FROM`), so a program started after the
 * restart is covered too (hosts_util.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char* what) {
  perror(what);
  exit(1);
}

#include "hosts_util.h"

static void userver(const struct sockaddr_in* a, int n) {
  int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, (const struct sockaddr*)a, sizeof *a) != 0) die("bind");
  int answered = 0, next = 0;
  unsigned long long sum = 0;
  for (;;) {
    if (answered == n) {  /* the last answer may be lost: answer repeats for a while */
      struct pollfd p = {s, POLLIN, 0};
      if (poll(&p, 1, 1000) == 0) break;
    }
    char req[64];
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t r = recvfrom(s, req, sizeof req - 1, 0, (struct sockaddr*)&from, &fl);
    if (r < 0) {
      if (errno == EINTR) continue;
      die("recvfrom");
    }
    req[r] = '\0';
    int id = atoi(req);
    if (id == next) {  /* a new request (repeats of answered ones are answered again, not counted) */
      sum += (unsigned long long)id * 3 + 1;
      ++next;
      ++answered;
    }
    char rep[64];
    int m = snprintf(rep, sizeof rep, "%d %llu", id, (unsigned long long)id * id + 11);
    if (sendto(s, rep, (size_t)m, 0, (struct sockaddr*)&from, fl) != m) die("sendto");
  }
  printf("server: %d requests, sum %llu\n", n, sum);
}

static int uclient(const struct sockaddr_in* a, int from_id, int n, unsigned pace, char** argv) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) die("socket");
  for (int i = from_id; i < n; ++i) {
    char req[32];
    int m = snprintf(req, sizeof req, "%d", i);
    int tries = 0;
    for (;;) {
      if (sendto(s, req, (size_t)m, 0, (const struct sockaddr*)a, sizeof *a) != m) die("sendto");
      struct pollfd p = {s, POLLIN, 0};
      int got = 0;
      while (poll(&p, 1, 300) > 0) {
        char rep[64];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t r = recvfrom(s, rep, sizeof rep - 1, 0, (struct sockaddr*)&from, &fl);
        if (r < 0) die("recvfrom");
        rep[r] = '\0';
        if (from.sin_addr.s_addr != a->sin_addr.s_addr || from.sin_port != a->sin_port) {
          char want[32], was[32];
          inet_ntop(AF_INET, &a->sin_addr, want, sizeof want);
          inet_ntop(AF_INET, &from.sin_addr, was, sizeof was);
          printf("request %d: answer from %s:%d, sent to %s:%d\n", i, was, ntohs(from.sin_port), want, ntohs(a->sin_port));
          return 4;
        }
        if (atoi(rep) == i) {  /* an answer to an earlier, repeated request is dropped */
          printf("request %d: %s\n", i, strchr(rep, ' ') ? strchr(rep, ' ') + 1 : rep);
          fflush(stdout);
          got = 1;
          break;
        }
      }
      if (got) break;
      if (++tries == 20) {
        printf("request %d: no answer in 6 s\n", i);
        return 3;
      }
    }
    usleep(pace);
    go_on_in_new_image(i, n, argv);
  }
  return 0;
}

int main(int argc, char** argv) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  if (argc == 5 && strcmp(argv[1], "userver") == 0) {
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    setvbuf(stdout, NULL, _IOLBF, 0);
    userver(&a, atoi(argv[3]));
    return 0;
  }
  int from, n;
  unsigned pace;
  if (client_args(argc, argv, "uclient", &a, &from, &n, &pace)) return uclient(&a, from, n, pace, argv);
  fprintf(stderr, "usage: udp_hosts userver PORT N PACE_US | uclient ADDR PORT N PACE_US [FROM]\n");
  return 2;
}
