/* A half-closed connection: the client streams CBYTES, shuts its writing side (shutdown SHUT_WR) and then
 * reads the server's own stream of BYTES; the server reads slowly (PACE_US after each 4 KiB read, so
 * the client's bytes sit in the connection long after the client shut it), and once it has seen the
 * client's end of file it sends a trailer and closes. The trailer is only sent after the end of file,
 * so a connection that comes back fully open hangs both instead of passing.
 *   half_close server PORT BYTES CBYTES PACE_US   (TCP on 127.0.0.1:PORT)
 *   half_close client PORT BYTES CBYTES PACE_US
 *   half_close pair BYTES CBYTES PACE_US          (a Unix socketpair across fork: the child serves, and only
 *                                           the parent prints, ending with the child's exit status)
 * Output: checksum lines (stream_util.h) and the end-of-file lines, the same however it was
 * checkpointed and restarted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "net_util.h"

static const char kTrailer[] = "served+eof\n";
static unsigned pace_us;
static uint64_t client_bytes;

/* Reads the client's CBYTES in 4 KiB reads, PACE_US apart, so they sit in the connection for a while
 * after the client shut its writing side; then the end of file must follow. */
static void* server_reader(void* arg) {
  int fd = *(int*)arg;
  static uint8_t buf[4096];
  uint64_t got = 0, sum = 0;
  for (;;) {
    int r = read_some(fd, buf, sizeof buf);
    if (r == 0) break;
    for (int i = 0; i < r; ++i, ++got) {
      if (got >= client_bytes || buf[i] != seq_byte(21, got)) {
        fprintf(stderr, "server: client byte %llu wrong or too many\n", (unsigned long long)got);
        exit(1);
      }
      sum = sum * 31 + buf[i];
    }
    usleep(pace_us);
  }
  if (got != client_bytes) {
    fprintf(stderr, "server: end of file after %llu of %llu bytes\n", (unsigned long long)got,
            (unsigned long long)client_bytes);
    exit(1);
  }
  printf("server: %llu bytes checksum %llu, then end of file\n", (unsigned long long)got, (unsigned long long)sum);
  fflush(stdout);
  return NULL;
}

static void server_role(int fd) {
  pthread_t t;
  pthread_create(&t, NULL, server_reader, &fd);
  send_stream(fd, 22, pace_us * 3 / 4);
  pthread_join(t, NULL); /* the trailer only after the end of file */
  write_all(fd, (const uint8_t*)kTrailer, sizeof kTrailer - 1);
  close(fd);
}

static void client_role(int fd) {
  /* Room for all of it in the connection (Unix: the sender's buffer bounds what is in flight), so the
   * client shuts its side at once while the server has hardly read anything. */
  int big = 1 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  uint64_t t = total;
  total = client_bytes;
  send_stream(fd, 21, 0);
  total = t;
  if (shutdown(fd, SHUT_WR) != 0) die("shutdown");
  printf("client: writing side shut\n");
  fflush(stdout);
  check_stream(fd, "client", 22, 0);
  char got[sizeof kTrailer];
  read_trailer(fd, got, sizeof kTrailer - 1, "client");
  printf("client: trailer %sclient: end of file\n", got);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: half_close server|client PORT BYTES CBYTES PACE_US | half_close pair BYTES CBYTES PACE_US\n");
    return 2;
  }
  if (strcmp(argv[1], "pair") == 0) {
    total = strtoull(argv[2], NULL, 10);
    client_bytes = strtoull(argv[3], NULL, 10);
    pace_us = (unsigned)atoi(argv[4]);
    int fd;
    pid_t child = fork_pair(SOCK_STREAM, &fd);
    if (child == 0) {
      server_role(fd);
      _exit(0);
    }
    client_role(fd);
    int st = 0;
    if (waitpid(child, &st, 0) != child) die("waitpid");
    printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return 0;
  }
  if (argc < 6) return 2;
  int port = atoi(argv[2]);
  total = strtoull(argv[3], NULL, 10);
  client_bytes = strtoull(argv[4], NULL, 10);
  pace_us = (unsigned)atoi(argv[5]);
  if (strcmp(argv[1], "server") == 0) {
    int s = accept(listen_loopback(port, 8), NULL, NULL);
    if (s < 0) die("accept");
    server_role(s);
    return 0;
  }
  client_role(connect_loopback(port));
  return 0;
}
