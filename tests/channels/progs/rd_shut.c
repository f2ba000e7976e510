/* A connection whose one end shut its receiving side (shutdown SHUT_RD): the "shut" end S first reads
 * the other end's 64 KiB greeting, shuts its receiving side, and then streams BYTES to the other end O,
 * PACE_US after each chunk; after every chunk a non-blocking read on S must give end of file (0), never
 * "nothing yet" (EAGAIN), which is what a connection that came back fully open gives. O reads S's stream
 * slowly (so bytes are in flight at every checkpoint) and, over a Unix socketpair, also checks that its
 * own writes fail with EPIPE (the kernel shuts O's sending side with S's receiving side).
 *   rd_shut server PORT BYTES PACE_US   (TCP on 127.0.0.1:PORT: the server is S)
 *   rd_shut client PORT BYTES PACE_US   (O)
 *   rd_shut pair BYTES PACE_US          (a Unix socketpair across fork: the parent is S, the child O;
 *                                        only the parent prints, ending with the child's exit status)
 * Output: checksum lines (stream_util.h) and the end-of-file lines, the same however it was
 * checkpointed and restarted. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "net_util.h"

enum { kGreeting = 65536 };
static unsigned pace_us;
static int unix_pair;

static void shut_role(int fd) {
  static uint8_t buf[kGreeting];
  for (size_t n = 0; n < kGreeting;) {
    int r = read_some(fd, buf + n, kGreeting - n);
    if (r == 0) {
      fprintf(stderr, "shut end: end of file inside the greeting\n");
      exit(1);
    }
    n += (size_t)r;
  }
  for (size_t i = 0; i < kGreeting; ++i)
    if (buf[i] != seq_byte(41, i)) {
      fprintf(stderr, "shut end: greeting byte %zu wrong\n", i);
      exit(1);
    }
  if (shutdown(fd, SHUT_RD) != 0) die("shutdown(SHUT_RD)");
  printf("shut end: greeting read, receiving side shut\n");
  fflush(stdout);
  static uint8_t out[8192];
  uint64_t sent = 0;
  unsigned k = 0;
  while (sent < total) {
    size_t n = 1000 + (k++ * 7919) % (sizeof out - 1000);
    if (n > total - sent) n = (size_t)(total - sent);
    for (size_t i = 0; i < n; ++i) out[i] = seq_byte(42, sent + i);
    write_all(fd, out, n);
    sent += n;
    uint8_t b;
    ssize_t r;
    do r = recv(fd, &b, 1, MSG_DONTWAIT); while (r < 0 && errno == EINTR);
    if (r != 0) {
      fprintf(stderr, "shut end: after %llu bytes sent a read gives %s, not end of file\n", (unsigned long long)sent,
              r > 0 ? "data" : strerror(errno));
      exit(1);
    }
    usleep(pace_us);
  }
  shutdown(fd, SHUT_WR);
  printf("shut end: %llu bytes sent, reads still end of file\n", (unsigned long long)sent);
  fflush(stdout);
}

static void other_role(int fd) {
  static uint8_t buf[kGreeting];
  for (size_t i = 0; i < kGreeting; ++i) buf[i] = seq_byte(41, i);
  write_all(fd, buf, kGreeting);
  reader_pace_us = pace_us / 2;
  check_stream(fd, unix_pair ? "child" : "other end", 42, 0);
  if (unix_pair) {
    ssize_t w;
    do w = send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT); while (w < 0 && errno == EINTR);
    if (!(w < 0 && errno == EPIPE)) {
      fprintf(stderr, "child: a write to the shut end gives %s, not EPIPE\n", w >= 0 ? "success" : strerror(errno));
      exit(1);
    }
  }
  uint8_t b;
  if (read_some(fd, &b, 1) != 0) {
    fprintf(stderr, "other end: data after the stream\n");
    exit(1);
  }
  if (!unix_pair) {
    printf("other end: end of file\n");
    fflush(stdout);
  }
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 4 && strcmp(argv[1], "pair") == 0) {
    unix_pair = 1;
    total = strtoull(argv[2], NULL, 10);
    pace_us = (unsigned)atoi(argv[3]);
    int fd;
    pid_t child = fork_pair(SOCK_STREAM, &fd);
    if (child == 0) {
      other_role(fd);
      _exit(0);
    }
    shut_role(fd);
    int st = 0;
    if (waitpid(child, &st, 0) != child) die("waitpid");
    printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return 0;
  }
  if (argc < 5) {
    fprintf(stderr, "usage: rd_shut server|client PORT BYTES PACE_US | rd_shut pair BYTES PACE_US\n");
    return 2;
  }
  int port = atoi(argv[2]);
  total = strtoull(argv[3], NULL, 10);
  pace_us = (unsigned)atoi(argv[4]);
  if (strcmp(argv[1], "server") == 0) {
    int s = accept(listen_loopback(port, 8), NULL, NULL);
    if (s < 0) die("accept");
    shut_role(s);
    return 0;
  }
  other_role(connect_loopback(port));
  return 0;
}
