/* Connected UDP sockets with datagrams queued at every checkpoint. "recv PORT N": a UDP socket bound to
 * 127.0.0.1:PORT takes the sender's "hello", connects to the sender's address and reads N numbered
 * datagrams slowly (a nap before each), checking each one's length and bytes against its number and that
 * recvfrom reports the peer it is connected to (getpeername); one line per datagram. It acknowledges every 4th. "send PORT N": a
 * UDP socket connected to PORT sends the N datagrams, at most 12 ahead of the acknowledgements (UDP drops
 * what does not fit a receive buffer), so some 8-12 of them, among them empty ones and ones of 65507 bytes
 * (the IPv4 maximum), wait in the receiver's queue at almost any instant. Before revive kept such a queue
 * the checkpoint was refused (taken again 12 times, then failed). ADDR (default 127.0.0.1): the address the
 * receiver binds (0.0.0.0: whichever host it runs on), the address the sender sends to (tests/hosts).
 * "recvfork": the receiver forks a child that holds the socket too and never reads it.
 * usage: udp_queue recv|recvfork|send PORT N [ADDR] */
#include <arpa/inet.h>
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

enum { kWindow = 12, kAckEvery = 4, kMax = 65507 };
static unsigned char buf[kMax + 1];

static void nap_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Datagram i: its length and its bytes (never ASCII, so never "hello"). */
static size_t len_of(int i) {
  if (i % 10 == 3) return 0;
  if (i % 50 == 17) return kMax;
  return (size_t)(i * 131) % 1400 + 1;
}
static unsigned char byte_of(int i, size_t k) { return (unsigned char)(0x80 | ((i * 7 + k) & 0x7f)); }

static ssize_t recv_r(int s, void* b, size_t n, int flags, struct sockaddr_in* from) {
  socklen_t l = sizeof *from;
  ssize_t r;
  do r = recvfrom(s, b, n, flags, (struct sockaddr*)from, from ? &l : NULL);
  while (r < 0 && errno == EINTR);
  return r;
}

static ssize_t send_r(int s, const void* b, size_t n) {
  ssize_t r;
  do r = send(s, b, n, 0);
  while (r < 0 && errno == EINTR);
  return r;
}

static const char* addr = "127.0.0.1";

static struct sockaddr_in at(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
    fprintf(stderr, "bad address %s\n", addr);
    exit(2);
  }
  return a;
}

static int receiver(int port, int n, int fork_holder) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = at(port), from;
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("bind");
    return 2;
  }
  ssize_t r = recv_r(s, buf, sizeof buf, 0, &from);
  if (r != 5 || memcmp(buf, "hello", 5) != 0 || connect(s, (struct sockaddr*)&from, sizeof from) != 0) {
    perror("hello");
    return 2;
  }
  /* "recvfork": a child holds the socket too and never reads it (its queue must come back once, whichever
   * holder keeps it); it leaves when the parent closes the pipe. */
  int hold[2] = {-1, -1};
  pid_t child = -1;
  if (fork_holder) {
    if (pipe(hold) != 0 || (child = fork()) < 0) return 2;
    if (child == 0) {
      char b;
      close(hold[1]);
      while (read(hold[0], &b, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    close(hold[0]);
  }
  unsigned sum_all = 0;
  for (int i = 0; i < n;) {
    if (i % kAckEvery == 0 && send_r(s, &i, sizeof i) != sizeof i) {  /* also answers the hello */
      fprintf(stderr, "ack %d BROKEN: %s\n", i, strerror(errno));
      return 1;
    }
    nap_ms(12);
    struct sockaddr_in f;
    memset(&f, 0, sizeof f);
    r = recv_r(s, buf, sizeof buf, MSG_TRUNC, &f);
    if (r < 0) {
      fprintf(stderr, "recv %d BROKEN: %s\n", i, strerror(errno));
      return 1;
    }
    if (r == 5 && memcmp(buf, "hello", 5) == 0) continue;  /* the sender's hello sent again */
    size_t want = len_of(i);
    int ok = (size_t)r == want;
    unsigned sum = 0;
    for (size_t k = 0; ok && k < want; ++k) {
      ok = buf[k] == byte_of(i, k);
      sum = sum * 31 + buf[k];
    }
    /* The peer it is connected to now: after a restart on other hosts its address is another. */
    struct sockaddr_in p;
    socklen_t pl = sizeof p;
    int peer = getpeername(s, (struct sockaddr*)&p, &pl) == 0 && f.sin_family == AF_INET && f.sin_port == p.sin_port &&
               f.sin_addr.s_addr == p.sin_addr.s_addr;
    printf("%d len %zd %s from %s\n", i, r, ok ? "ok" : "BAD", peer ? "peer" : "ANOTHER ADDRESS");
    sum_all = sum_all * 131 + sum;
    ++i;
  }
  if (send_r(s, &n, sizeof n) != sizeof n) return 1;
  if (child > 0) {
    int st = 0;
    close(hold[1]);
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
  }
  printf("receiver: %d datagrams, sum %08x\n", n, sum_all);
  return 0;
}

static int sender(int port, int n) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = at(port);
  if (s < 0 || connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("connect");
    return 2;
  }
  int acked = -1;  /* the receiver has read every datagram before this number */
  while (acked < 0) {  /* the receiver may not be up yet: hello again until its first acknowledgement */
    send_r(s, "hello", 5);
    struct pollfd p = {s, POLLIN, 0};
    if (poll(&p, 1, 200) > 0 && recv_r(s, &acked, sizeof acked, MSG_DONTWAIT, NULL) != sizeof acked) acked = -1;
  }
  for (int i = 0; i < n || acked < n;) {
    if (i < n && i < acked + kWindow) {
      size_t len = len_of(i);
      for (size_t k = 0; k < len; ++k) buf[k] = byte_of(i, k);
      if (send_r(s, buf, len) != (ssize_t)len) {
        fprintf(stderr, "send %d BROKEN: %s\n", i, strerror(errno));
        return 1;
      }
      ++i;
      nap_ms(1);
      continue;
    }
    int v;
    if (recv_r(s, &v, sizeof v, 0, NULL) != sizeof v) {
      fprintf(stderr, "ack BROKEN: %s\n", strerror(errno));
      return 1;
    }
    if (v > acked) acked = v;
  }
  printf("sender: %d datagrams acknowledged\n", n);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: %s recv|recvfork|send PORT N [ADDR]\n", argv[0]);
    return 2;
  }
  if (argc == 5) addr = argv[4];
  setvbuf(stdout, NULL, _IOLBF, 0);
  int port = atoi(argv[2]), n = atoi(argv[3]);
  if (strncmp(argv[1], "recv", 4) == 0) return receiver(port, n, strcmp(argv[1], "recvfork") == 0);
  return sender(port, n);
}
