/* A UDP request/response pair that can span hosts, as a resolver and its server: `udp_hosts userver PORT N
 * PACE_US` binds the wildcard address and answers each request at the address it came from (recvfrom,
 * sendto), until it has answered N distinct ones (then answers repeats for 1 s more); `udp_hosts uclient
 * ADDR PORT N PACE_US` sends N requests to ADDR:PORT with sendto, each sent again after 300 ms without an
 * answer, and takes an answer only from the address it sent to, as a resolver does: one from elsewhere is
 * reported and ends it (exit 4). Restarted on swapped hosts the client still sends to the server's OLD
 * address, and must get the answers from it: the channels plugin's datagram routes. Every 50 requests the
 * client execs itself to go on (`... uclient ADDR PORT N PACE_US FROM`), so a program started after the
 * restart is covered too (hosts_util.h). `mserver`/`mclient`: the same with batches, as glibc's resolver
 * and QUIC stacks send: the client sends each request twice in one sendmmsg and takes answers with
 * recvmmsg (up to 4 at once); the server takes requests with recvmmsg and answers them with one sendmmsg. */
#define _GNU_SOURCE /* sendmmsg, recvmmsg */
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

static int g_mmsg; /* mserver/mclient: batches */

/* Up to cap datagrams (batches: recvmmsg, at least one, waiting; else one recvfrom) into bufs[k] (64 bytes,
 * NUL-terminated) with their sources; flags MSG_DONTWAIT: none is not an error. -1: errno. */
static int recv_some(int s, char bufs[][64], struct sockaddr_in* from, int cap, int flags) {
  if (!g_mmsg) {
    socklen_t fl = sizeof from[0];
    ssize_t r = recvfrom(s, bufs[0], 63, flags, (struct sockaddr*)&from[0], &fl);
    if (r < 0) return -1;
    bufs[0][r] = '\0';
    return 1;
  }
  struct mmsghdr v[8];
  struct iovec io[8];
  memset(v, 0, sizeof v);
  for (int k = 0; k < cap && k < 8; ++k) {
    io[k].iov_base = bufs[k];
    io[k].iov_len = 63;
    v[k].msg_hdr.msg_iov = &io[k];
    v[k].msg_hdr.msg_iovlen = 1;
    v[k].msg_hdr.msg_name = &from[k];
    v[k].msg_hdr.msg_namelen = sizeof from[k];
  }
  int r = recvmmsg(s, v, (unsigned)(cap < 8 ? cap : 8), flags | MSG_WAITFORONE, NULL);
  for (int k = 0; k < r; ++k) bufs[k][v[k].msg_len] = '\0';
  return r;
}

/* n datagrams to one address (batches: one sendmmsg), or to each bufs[k]'s own address. */
static void send_all(int s, char bufs[][64], const struct sockaddr_in* to, int n, int each) {
  if (!g_mmsg) {
    for (int k = 0; k < n; ++k) {
      size_t m = strlen(bufs[k]);
      if (sendto(s, bufs[k], m, 0, (const struct sockaddr*)&to[each ? k : 0], sizeof to[0]) != (ssize_t)m) die("sendto");
    }
    return;
  }
  struct mmsghdr v[8];
  struct iovec io[8];
  memset(v, 0, sizeof v);
  for (int k = 0; k < n && k < 8; ++k) {
    io[k].iov_base = bufs[k];
    io[k].iov_len = strlen(bufs[k]);
    v[k].msg_hdr.msg_iov = &io[k];
    v[k].msg_hdr.msg_iovlen = 1;
    v[k].msg_hdr.msg_name = (void*)&to[each ? k : 0];
    v[k].msg_hdr.msg_namelen = sizeof to[0];
  }
  int r = sendmmsg(s, v, (unsigned)n, 0);
  if (r != n) die("sendmmsg");
  for (int k = 0; k < n; ++k)
    if (v[k].msg_len != io[k].iov_len) die("sendmmsg: msg_len");
}

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
    char req[8][64], rep[8][64];
    struct sockaddr_in from[8];
    int got = recv_some(s, req, from, 8, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      die("recvfrom");
    }
    for (int k = 0; k < got; ++k) {
      int id = atoi(req[k]);
      if (id == next) {  /* a new request (repeats of answered ones are answered again, not counted) */
        sum += (unsigned long long)id * 3 + 1;
        ++next;
        ++answered;
      }
      snprintf(rep[k], sizeof rep[k], "%d %llu", id, (unsigned long long)id * id + 11);
    }
    send_all(s, rep, from, got, 1);
  }
  printf("server: %d requests, sum %llu\n", n, sum);
}

static int uclient(const struct sockaddr_in* a, int from_id, int n, unsigned pace, char** argv) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) die("socket");
  for (int i = from_id; i < n; ++i) {
    char req[2][64];
    snprintf(req[0], sizeof req[0], "%d", i);
    strcpy(req[1], req[0]);
    int tries = 0;
    for (;;) {
      send_all(s, req, a, g_mmsg ? 2 : 1, 0);
      struct pollfd p = {s, POLLIN, 0};
      int got = 0;
      while (!got && poll(&p, 1, 300) > 0) {
        char rep[4][64];
        struct sockaddr_in from[4];
        int r = recv_some(s, rep, from, 4, MSG_DONTWAIT);
        if (r < 0) die("recvfrom");
        for (int k = 0; k < r && !got; ++k) {
          if (from[k].sin_addr.s_addr != a->sin_addr.s_addr || from[k].sin_port != a->sin_port) {
            char want[32], was[32];
            inet_ntop(AF_INET, &a->sin_addr, want, sizeof want);
            inet_ntop(AF_INET, &from[k].sin_addr, was, sizeof was);
            printf("request %d: answer from %s:%d, sent to %s:%d\n", i, was, ntohs(from[k].sin_port), want,
                   ntohs(a->sin_port));
            return 4;
          }
          if (atoi(rep[k]) == i) {  /* an answer to an earlier, repeated request is dropped */
            printf("request %d: %s\n", i, strchr(rep[k], ' ') ? strchr(rep[k], ' ') + 1 : rep[k]);
            fflush(stdout);
            got = 1;
          }
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
  g_mmsg = argc > 1 && argv[1][0] == 'm';
  if (argc == 5 && (strcmp(argv[1], "userver") == 0 || strcmp(argv[1], "mserver") == 0)) {
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    setvbuf(stdout, NULL, _IOLBF, 0);
    userver(&a, atoi(argv[3]));
    return 0;
  }
  int from, n;
  unsigned pace;
  if (client_args(argc, argv, g_mmsg ? "mclient" : "uclient", &a, &from, &n, &pace))
    return uclient(&a, from, n, pace, argv);
  fprintf(stderr, "usage: udp_hosts userver|mserver PORT N PACE_US | uclient|mclient ADDR PORT N PACE_US [FROM]\n");
  return 2;
}
