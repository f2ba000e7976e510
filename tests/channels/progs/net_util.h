/* Shared by the channels test programs that talk over sockets: the loopback address of a port, a connect
 * that retries while the server is not listening yet, a listener, and a socketpair across fork. Errors
 * exit 1 with a message (stream_util.h's die). */
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "stream_util.h"

static struct sockaddr_in loopback_addr(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* Connects to 127.0.0.1:port, retrying for ~4 s while nobody listens. */
__attribute__((unused)) static int connect_loopback(int port) {
  struct sockaddr_in a = loopback_addr(port);
  for (int tries = 0;; ++tries) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) return s;
    close(s);
    if (tries > 200) die("connect");
    usleep(20000);
  }
}

__attribute__((unused)) static int listen_loopback(int port, int backlog) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = loopback_addr(port);
  if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, backlog) != 0) die("bind/listen");
  return l;
}

/* socketpair(AF_UNIX, type) across fork. Parent: returns the child's pid, *mine = its end. Child: returns
 * 0, *mine = its end, stdout goes to /dev/null (only the parent prints: output independent of
 * scheduling). */
__attribute__((unused)) static pid_t fork_pair(int type, int* mine) {
  int sv[2];
  if (socketpair(AF_UNIX, type, 0, sv) != 0) die("socketpair");
  pid_t child = fork();
  if (child < 0) die("fork");
  close(sv[child == 0 ? 0 : 1]);
  *mine = sv[child == 0 ? 1 : 0];
  if (child == 0) {
    fflush(stdout);
    if (!freopen("/dev/null", "w", stdout)) die("freopen");
  }
  return child;
}

/* Reads exactly `len` bytes of a trailer into out (nul-terminated), then the end of file: exits 1 naming
 * `who` on an end of file before it or data after it. */
__attribute__((unused)) static void read_trailer(int fd, char* out, size_t len, const char* who) {
  for (size_t n = 0; n < len;) {
    int r = read_some(fd, (uint8_t*)out + n, len - n);
    if (r == 0) {
      fprintf(stderr, "%s: end of file before the trailer\n", who);
      exit(1);
    }
    n += (size_t)r;
  }
  out[len] = 0;
  uint8_t b;
  if (read_some(fd, &b, 1) != 0) {
    fprintf(stderr, "%s: data after the trailer\n", who);
    exit(1);
  }
}
