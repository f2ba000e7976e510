/* A connected UDP socket held by two processes (inherited by fork), talking to a third process of the
 * computation. "server PORT STEPS": a UDP socket bound to PORT echoes every datagram doubled to its
 * sender until "end". "client PORT STEPS": a UDP socket connected to PORT (its port autobound), then a
 * fork; parent and child take turns (a token over pipes) and each turn sends a number on the shared
 * socket and reads the reply from it. Before revive made such a socket once and handed it to the other
 * holder, each holder bound its port again and the second bind failed the restart.
 * usage: udp_shared server|client PORT STEPS */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* I/O that retries EINTR (the checkpoint signal). */
static ssize_t recv_r(int s, void* b, size_t n, struct sockaddr_in* from) {
  socklen_t l = sizeof *from;
  ssize_t r;
  do r = recvfrom(s, b, n, 0, (struct sockaddr*)from, from ? &l : NULL);
  while (r < 0 && errno == EINTR);
  return r;
}

/* A turn passes over a pipe with the reply of the turn before (the child's stdout after a restart is the
 * restart's own, with an offset of its own: only the parent prints). */
static int token(int fd, long* v, int put) {
  ssize_t r;
  do r = put ? write(fd, v, sizeof *v) : read(fd, v, sizeof *v);
  while (r < 0 && errno == EINTR);
  return r == (ssize_t)sizeof *v;
}

static int server(int port) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("bind");
    return 2;
  }
  long served = 0;
  for (;;) {
    char m[32], r[32];
    struct sockaddr_in from;
    ssize_t n = recv_r(s, m, sizeof m - 1, &from);
    if (n <= 0) {
      perror("server recv");
      return 3;
    }
    m[n] = 0;
    if (strcmp(m, "end") == 0) break;
    int k = snprintf(r, sizeof r, "%ld %ld", atol(m), 2 * atol(m));
    if (sendto(s, r, k, 0, (struct sockaddr*)&from, sizeof from) != k) {
      perror("server send");
      return 4;
    }
    ++served;
  }
  printf("server: done (%s)\n", served > 0 ? "echoed" : "nothing echoed");  /* resends vary the count */
  return 0;
}

static int client(int port, int steps) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int to_child[2], to_parent[2];
  if (s < 0 || pipe(to_child) != 0 || pipe(to_parent) != 0) return 2;
  /* The server may not be up yet: a connected socket's sends to a closed port fail (ECONNREFUSED) later. */
  nap_ms(200);
  if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("connect");
    return 2;
  }
  pid_t child = fork();
  const int me = child == 0;  /* 0: parent (even steps), 1: child (odd steps) */
  int in = me ? to_child[0] : to_parent[0], out = me ? to_parent[1] : to_child[1];
  long v = -1;
  if (me == 0 && !token(to_parent[1], &v, 1)) return 5;  /* the parent takes the first turn */
  /* Each keeps only its ends: a holder that dies ends the other's wait with end of file. */
  close(me ? to_child[1] : to_child[0]);
  close(me ? to_parent[0] : to_parent[1]);
  for (int i = me; i < steps; i += 2) {
    if (!token(in, &v, 0)) {
      if (!me) printf("parent: turn lost\n");
      return 6;
    }
    if (!me && i > 0) printf("step %d (child): %ld\n", i - 1, v);
    char m[32], r[32];
    int k = snprintf(m, sizeof m, "%d", i);
    /* A request waiting in the server's queue at a checkpoint is sent again from another socket (its
     * sender address is not kept, docs/channels.md): its reply is lost, so an unanswered request is sent
     * again, as UDP clients do; a late reply to an earlier one is told apart by its number. */
    ssize_t n;
    for (;;) {
      n = send(s, m, k, 0);
      if (n != k) {
        fprintf(stderr, "step %d: send BROKEN (%s)\n", i, strerror(errno));
        return 1;
      }
      struct pollfd p = {s, POLLIN, 0};
      int pr = poll(&p, 1, 300);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) continue;
      n = recv_r(s, r, sizeof r - 1, NULL);
      if (n <= 0) {
        fprintf(stderr, "step %d: recv BROKEN (%s)\n", i, n == 0 ? "empty" : strerror(errno));
        return 1;
      }
      r[n] = 0;
      if (atol(r) == i) break;
    }
    v = atol(strchr(r, ' ') ? strchr(r, ' ') + 1 : r);
    if (!me) printf("step %d (parent): %ld\n", i, v);
    nap_ms(3);
    if (!token(out, &v, 1)) return 5;
  }
  if (me) _exit(0);
  if (steps % 2 == 0 && token(in, &v, 0)) printf("step %d (child): %ld\n", steps - 1, v);
  int st = 0;
  waitpid(child, &st, 0);
  send(s, "end", 3, 0);
  printf("client done, child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s server|client PORT STEPS\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  int port = atoi(argv[2]);
  return strcmp(argv[1], "server") == 0 ? server(port) : client(port, atoi(argv[3]));
}
