/* Shared by the tests/hosts programs (after stream_util.h): a TCP connect that waits for a server that
 * may still be starting on another host (up to about 10 s), with TCP_NODELAY; a server's one connection. */
#pragma once
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int connect_retrying(const struct sockaddr_in* a) {
  for (int tries = 0;; ++tries) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (connect(s, (const struct sockaddr*)a, sizeof *a) == 0) {
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return s;
    }
    close(s);
    if (tries > 500) die("connect");
    usleep(20000);
  }
}

/* Listens on the wildcard address (so a restored server listens again on whichever host it is on) and
 * accepts one connection. */
static inline int accept_one(const struct sockaddr_in* a) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (const struct sockaddr*)a, sizeof *a) != 0 || listen(l, 8) != 0) die("bind/listen");
  int s = accept(l, NULL, NULL);
  if (s < 0) die("accept");
  return s;
}

/* The request clients' arguments (tcp_hosts rclient, udp_hosts uclient): "MODE ADDR PORT N PACE_US [FROM]".
 * False: not this mode. */
static inline int client_args(int argc, char** argv, const char* mode, struct sockaddr_in* a, int* from, int* n,
                              unsigned* pace) {
  if ((argc != 6 && argc != 7) || strcmp(argv[1], mode) != 0 || inet_pton(AF_INET, argv[2], &a->sin_addr) != 1)
    return 0;
  a->sin_port = htons((uint16_t)atoi(argv[3]));
  *n = atoi(argv[4]);
  *pace = (unsigned)atoi(argv[5]);
  *from = argc == 7 ? atoi(argv[6]) : 0;
  return 1;
}

/* After request i of n: every 50 requests the client execs itself to go on from the next (the FROM
 * argument), so a program started after a restart (none of the restored process's memory, only its
 * environment) makes requests too. */
static inline void go_on_at(int i, int n, char** argv, const struct sockaddr_in* at) {
  if (i % 50 != 49 || i + 1 >= n) return;
  char next[16], addr[INET_ADDRSTRLEN], port[8];
  snprintf(next, sizeof next, "%d", i + 1);
  if (at) {  /* the server's address as learned since (nclient): the new image goes on there */
    inet_ntop(AF_INET, &at->sin_addr, addr, sizeof addr);
    snprintf(port, sizeof port, "%u", (unsigned)ntohs(at->sin_port));
  }
  execl("/proc/self/exe", argv[0], argv[1], at ? addr : argv[2], at ? port : argv[3], argv[4], argv[5], next,
        (char*)NULL);
  perror("exec");
  exit(1);
}
static inline void go_on_in_new_image(int i, int n, char** argv) { go_on_at(i, n, argv, NULL); }
