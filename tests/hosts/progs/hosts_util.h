/* Shared by the tests/hosts programs (after stream_util.h): a TCP connect that waits for a server that
 * may still be starting on another host (up to about 10 s), with TCP_NODELAY; a server's one connection. */
#pragma once
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int connect_retrying(const struct sockaddr_in* a) {
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
static int accept_one(const struct sockaddr_in* a) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (const struct sockaddr*)a, sizeof *a) != 0 || listen(l, 8) != 0) die("bind/listen");
  int s = accept(l, NULL, NULL);
  if (s < 0) die("accept");
  return s;
}
