/* TCP pair for the channels tests and bench: `tcp_pair server PORT BYTES [PACE_US]` listens on
 * 127.0.0.1:PORT, accepts one client and echoes everything it receives; `tcp_pair client PORT BYTES
 * [PACE_US]` connects, streams BYTES of a deterministic pseudo-random sequence in chunks of varying size
 * (PACE_US microseconds of sleep after each 64 KiB chunk: 0 = full speed) while reading the echo back
 * on a second thread, and checks every echoed byte. Both print a checksum line at every MiB and at the
 * end, so the output of a run is the same however it was checkpointed, killed and restarted. After the
 * stream the client connects a second time ("bye") and the server must accept it on the same listening
 * socket: listening survives a restart. Any mismatch or error exits 1 with a message. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t total;
static unsigned pace_us;

static uint8_t byte_at(uint64_t i) {
  uint64_t x = (i / 8 + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (uint8_t)(x >> (8 * (i % 8)));
}

static void die(const char* what) {
  fprintf(stderr, "tcp_pair: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int read_some(int fd, uint8_t* buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die("read");
    return (int)r;
  }
}

static void write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write");
    p += w;
    n -= (size_t)w;
  }
}

/* Reads exactly `total` bytes, checks them against the sequence, prints checksums. */
static void check_stream(int fd, const char* who, int echo) {
  static uint8_t buf[1 << 16];
  uint64_t got = 0, sum = 0, next_report = 1 << 20;
  while (got < total) {
    size_t want = sizeof buf < total - got ? sizeof buf : (size_t)(total - got);
    int r = read_some(fd, buf, want);
    if (r == 0) {
      fprintf(stderr, "tcp_pair %s: connection closed after %llu of %llu bytes\n", who,
              (unsigned long long)got, (unsigned long long)total);
      exit(1);
    }
    for (int i = 0; i < r; ++i) {
      if (buf[i] != byte_at(got + (uint64_t)i)) {
        fprintf(stderr, "tcp_pair %s: byte %llu is %u, want %u\n", who, (unsigned long long)(got + (uint64_t)i),
                buf[i], byte_at(got + (uint64_t)i));
        exit(1);
      }
      sum = (sum * 31 + buf[i]) % 1000000007ull;
    }
    if (echo) write_all(fd, buf, (size_t)r);
    got += (uint64_t)r;
    while (got >= next_report) {
      printf("%s %llu MiB ok\n", who, (unsigned long long)(next_report >> 20));
      fflush(stdout);
      next_report += 1 << 20;
    }
  }
  printf("%s done %llu bytes checksum %llu\n", who, (unsigned long long)got, (unsigned long long)sum);
  fflush(stdout);
}

static void* sender(void* arg) {
  int fd = *(int*)arg;
  static uint8_t buf[1 << 16];
  uint64_t sent = 0;
  unsigned k = 0;
  while (sent < total) {
    size_t n = 1000 + (k++ * 7919) % (sizeof buf - 1000); /* varying chunk sizes */
    if (n > total - sent) n = (size_t)(total - sent);
    for (size_t i = 0; i < n; ++i) buf[i] = byte_at(sent + i);
    write_all(fd, buf, n);
    sent += n;
    if (pace_us) usleep(pace_us);
  }
  return NULL;
}

static struct sockaddr_in addr(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static int connect_to(int port) {
  struct sockaddr_in a = addr(port);
  for (int tries = 0;; ++tries) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) return s;
    close(s);
    if (tries > 200) die("connect");
    usleep(20000);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tcp_pair server|client PORT BYTES [PACE_US]\n");
    return 2;
  }
  int port = atoi(argv[2]);
  total = strtoull(argv[3], NULL, 10);
  pace_us = argc > 4 ? (unsigned)atoi(argv[4]) : 0;
  if (strcmp(argv[1], "server") == 0) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = addr(port);
    if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 8) != 0) die("bind/listen");
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    check_stream(s, "server", 1);
    int s2 = accept(l, NULL, NULL);
    if (s2 < 0) die("second accept");
    char bye[4] = {0};
    for (int got = 0; got < 3;) {
      int r = read_some(s2, (uint8_t*)bye + got, (size_t)(3 - got));
      if (r == 0) die("second connection closed early");
      got += r;
    }
    printf("server second connection: %s\n", bye);
    return 0;
  }
  int s = connect_to(port);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pthread_t t;
  pthread_create(&t, NULL, sender, &s);
  check_stream(s, "client", 0);
  pthread_join(t, NULL);
  int s2 = connect_to(port);
  write_all(s2, (const uint8_t*)"bye", 3);
  printf("client said bye\n");
  return 0;
}
