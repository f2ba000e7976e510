/* Connections still in a listener's backlog at checkpoint: the clients connect and send at once, the
 * server calls accept() only after DELAY_MS (so checkpoints find the connections not yet accepted, with
 * the clients' bytes in them), then reads each client's id and BYTES, checks them and answers "ok".
 *   backlog server ADDR K BYTES DELAY_MS   ADDR: a TCP port on 127.0.0.1, or a path (Unix socket)
 *   backlog client ADDR ID BYTES           ID in 1..K
 * The server prints one line per client, in id order; each client waits for the answer with epoll, then
 * prints it and the end of file: the output does not depend on scheduling. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/un.h>

#include "net_util.h"

static struct sockaddr_un unix_addr(const char* path) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  return a;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: backlog server ADDR K BYTES DELAY_MS | backlog client ADDR ID BYTES\n");
    return 2;
  }
  const char* where = argv[2];
  const int is_unix = where[0] == '/';
  int k = atoi(argv[3]);
  total = strtoull(argv[4], NULL, 10);
  if (k < 1 || k > 100) return 2;
  if (strcmp(argv[1], "server") == 0) {
    int l;
    if (is_unix) {
      struct sockaddr_un a = unix_addr(where);
      unlink(where);
      l = socket(AF_UNIX, SOCK_STREAM, 0);
      if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 16) != 0) die("bind/listen");
    } else {
      l = listen_loopback(atoi(where), 16);
    }
    for (int i = 0, n = atoi(argv[5]) / 10; i < n; ++i) usleep(10000); /* not accepting yet */
    static uint64_t sums[101];
    static uint8_t buf[1 << 16];
    int fds[101] = {0};
    for (int i = 0; i < k; ++i) {
      int s = accept(l, NULL, NULL);
      uint8_t id = 0;
      if (s < 0 || read_some(s, &id, 1) != 1 || id < 1 || id > k || fds[id]) die("accept a client");
      fds[id] = s;
      uint64_t got = 0, sum = 0;
      while (got < total) {
        int r = read_some(s, buf, sizeof buf < total - got ? sizeof buf : (size_t)(total - got));
        if (r == 0) {
          fprintf(stderr, "server: client %d closed after %llu bytes\n", id, (unsigned long long)got);
          return 1;
        }
        for (int j = 0; j < r; ++j, ++got) {
          if (buf[j] != seq_byte(id, got)) {
            fprintf(stderr, "server: client %d byte %llu wrong\n", id, (unsigned long long)got);
            return 1;
          }
          sum = sum * 31 + buf[j];
        }
      }
      sums[id] = sum;
      write_all(s, (const uint8_t*)"ok\n", 3);
    }
    for (int id = 1; id <= k; ++id) {
      printf("server: client %d sent %llu bytes checksum %llu\n", id, (unsigned long long)total,
             (unsigned long long)sums[id]);
      close(fds[id]);
    }
    return 0;
  }
  int s;
  if (is_unix) {
    struct sockaddr_un a = unix_addr(where);
    for (int tries = 0;; ++tries) {
      s = socket(AF_UNIX, SOCK_STREAM, 0);
      if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) break;
      close(s);
      if (tries > 200) die("connect");
      usleep(20000);
    }
  } else {
    s = connect_loopback(atoi(where));
  }
  /* The client waits for the answer with epoll (registered before the server accepts), so the socket
   * that replaces its connection at resume or restart must keep the registration. */
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0xb10c};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0) die("epoll");
  uint8_t id = (uint8_t)k;
  write_all(s, &id, 1);
  send_stream(s, id, 0);
  for (;;) {
    struct epoll_event got;
    int n = epoll_wait(ep, &got, 1, 30000);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1 || got.data.u64 != 0xb10c) {
      fprintf(stderr, "client %d: epoll_wait reported %d (no answer within 30 s?)\n", id, n);
      return 1;
    }
    break;
  }
  char ans[4] = {0};
  for (int got = 0; got < 3;) {
    int r = read_some(s, (uint8_t*)ans + got, (size_t)(3 - got));
    if (r == 0) {
      fprintf(stderr, "client %d: closed before the answer\n", id);
      return 1;
    }
    got += r;
  }
  uint8_t b;
  int r = read_some(s, &b, 1);
  printf("client %d: server answered %s", id, ans);
  printf("client %d: %s\n", id, r == 0 ? "end of file" : "more data");
  return 0;
}
