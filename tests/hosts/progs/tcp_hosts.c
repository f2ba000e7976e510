/* A TCP pair that can span hosts: `tcp_hosts server PORT BYTES PACE_US` listens on the wildcard address
 * (so it can listen again on whatever host it is restored on), accepts one client and echoes and checks
 * its stream; `tcp_hosts client ADDR PORT BYTES PACE_US` connects to ADDR, streams BYTES and checks the
 * echo. The stream and checksum lines are the channels tests' (tests/channels/progs/stream_util.h), so the
 * output is the same however the pair was checkpointed, killed and restarted, on whichever hosts.
 * `tcp_hosts rserver PORT N PACE_US` / `tcp_hosts rclient ADDR PORT N PACE_US`: a server answering N
 * requests (waiting 2 x PACE_US before each accept, so a checkpoint finds the client's connection in its
 * backlog about half the time), each on a new connection the client makes to ADDR:PORT (as Open MPI's TCP transport connects
 * to a peer's business card when it first sends to it): after a restart on other hosts the client still
 * connects to the server's OLD address, which only the channels plugin's connect() translation makes
 * reach the server's new host. A connect refused for ~2 s is reported and ends the client (exit 3).
 * `nserver`/`nclient`: the same, but every 40 requests the server listens on a new port (the kernel's
 * choice, every address) and closes the old listener, and each answer names the address the client
 * reached and the port to use next; the client connects there from then on (and its exec'd image too).
 * So after a migration the client knows the server's listener by the NEW host's address: a second
 * migration must translate that one too (the addresses of every host a process has lived on). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stream_util.h"
#include "hosts_util.h"

static unsigned pace_us;

static void* sender(void* arg) {
  send_stream(*(int*)arg, 0, pace_us);
  return NULL;
}

static int g_follow; /* nserver/nclient */

static int listen_on(const struct sockaddr_in* a) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (const struct sockaddr*)a, sizeof *a) != 0 || listen(l, 64) != 0) die("bind/listen");
  return l;
}

static void rserver(const struct sockaddr_in* a, int n, unsigned delay_us) {
  int l = listen_on(a);
  unsigned long long sum = 0;
  for (int i = 0; i < n; ++i) {
    usleep(delay_us);  /* the client's next connection waits in the backlog meanwhile (half the time) */
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    char req[64];
    size_t len = 0;
    while (len < sizeof req - 1 && (len == 0 || req[len - 1] != '\n')) {
      ssize_t r = read(s, req + len, sizeof req - 1 - len);
      if (r <= 0) die("read request");
      len += (size_t)r;
    }
    req[len] = '\0';
    unsigned long long v = strtoull(req, NULL, 10);
    sum += v;
    char rep[96];
    int m = snprintf(rep, sizeof rep, "%llu\n", v * v + 7);
    if (g_follow) {
      if (i % 40 == 39) {  /* a new listener on a port of the kernel's choice; the old one closed */
        struct sockaddr_in any = *a;
        any.sin_port = 0;
        close(l);
        l = listen_on(&any);
      }
      struct sockaddr_in me, lis;
      socklen_t ml = sizeof me, ll = sizeof lis;
      char addr[INET_ADDRSTRLEN];
      if (getsockname(s, (struct sockaddr*)&me, &ml) != 0 || getsockname(l, (struct sockaddr*)&lis, &ll) != 0)
        die("getsockname");
      inet_ntop(AF_INET, &me.sin_addr, addr, sizeof addr);
      m = snprintf(rep, sizeof rep, "%llu %s %u\n", v * v + 7, addr, (unsigned)ntohs(lis.sin_port));
    }
    if (write(s, rep, (size_t)m) != m) die("write reply");
    close(s);
  }
  printf("server: %d requests, sum %llu\n", n, sum);
}

/* One request on a new connection; 0, or 3 when the connect was refused for ~2 s. nclient: the answer's
 * address and port replace *a (printed: the value only, the same in every run). */
static int request(struct sockaddr_in* a, int i) {
  {
    int s = -1;
    for (int tries = 0;; ++tries) {  /* the server may still be starting (first request only) */
      s = socket(AF_INET, SOCK_STREAM, 0);
      if (s < 0) die("socket");
      if (connect(s, (const struct sockaddr*)a, sizeof *a) == 0) break;
      int e = errno;
      close(s);
      if (i > 0 && tries >= 100) {
        printf("request %d: connect: %s\n", i, strerror(e));
        return 3;
      }
      if (tries > 500) die("connect");
      usleep(20000);
    }
    char req[32], rep[96];
    int m = snprintf(req, sizeof req, "%d\n", 1000 + i);
    if (write(s, req, (size_t)m) != m) die("write request");
    size_t len = 0;
    for (ssize_t r; (r = read(s, rep + len, sizeof rep - 1 - len)) > 0;) len += (size_t)r;
    rep[len] = '\0';
    close(s);
    char* sp = strchr(rep, ' ');
    if (g_follow) {
      char addr[INET_ADDRSTRLEN];
      unsigned port = 0;
      if (!sp || sscanf(sp + 1, "%15s %u", addr, &port) != 2 || inet_pton(AF_INET, addr, &a->sin_addr) != 1 ||
          port == 0 || port > 65535) {
        printf("request %d: malformed answer '%s'\n", i, rep);
        return 3;
      }
      a->sin_port = htons((uint16_t)port);
      *sp = '\0';
      printf("request %d: %s\n", i, rep);
    } else {
      printf("request %d: %s", i, rep);
    }
    fflush(stdout);
  }
  return 0;
}

static int rclient(struct sockaddr_in* a, int from, int n, unsigned pace, char** argv) {
  for (int i = from; i < n; ++i) {
    if (request(a, i) != 0) return 3;
    usleep(pace);
    go_on_at(i, n, argv, g_follow ? a : NULL);
  }
  return 0;
}

int main(int argc, char** argv) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  g_follow = argc > 1 && argv[1][0] == 'n';
  if (argc == 5 && (strcmp(argv[1], "rserver") == 0 || strcmp(argv[1], "nserver") == 0)) {
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    setvbuf(stdout, NULL, _IOLBF, 0);
    rserver(&a, atoi(argv[3]), 2 * (unsigned)atoi(argv[4]));
    return 0;
  }
  int from, n;
  unsigned pace;
  if (client_args(argc, argv, g_follow ? "nclient" : "rclient", &a, &from, &n, &pace))
    return rclient(&a, from, n, pace, argv);
  if (argc == 5 && strcmp(argv[1], "server") == 0) {
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    total = strtoull(argv[3], NULL, 10);
    check_stream(accept_one(&a), "server", 0, 1);
    return 0;
  }
  if (argc != 6 || strcmp(argv[1], "client") != 0 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
    fprintf(stderr, "usage: tcp_hosts server PORT BYTES PACE_US | client ADDR PORT BYTES PACE_US\n");
    return 2;
  }
  a.sin_port = htons((uint16_t)atoi(argv[3]));
  total = strtoull(argv[4], NULL, 10);
  pace_us = (unsigned)atoi(argv[5]);
  int s = connect_retrying(&a);
  pthread_t t;
  pthread_create(&t, NULL, sender, &s);
  check_stream(s, "client", 0, 0);
  pthread_join(t, NULL);
  return 0;
}
