/* Unconnected UDP sockets with datagrams from several sources queued at every checkpoint: what recvfrom
 * reports as each datagram's source must survive the checkpoint and the restart.
 * "recv PORT N": a UDP socket bound to 127.0.0.1:PORT, never connected, reads datagrams slowly (a nap
 * before each) from two senders, checks that each sender's come in order and that recvfrom reports that
 * sender's own address (127.0.0.1:PORT+1+ID) for each, and acknowledges every 4th of a sender by sendto to
 * that sender's address. "send PORT ID N": a UDP socket bound to 127.0.0.1:PORT+1+ID, never connected,
 * sends N datagrams to PORT, at most 8 ahead of the acknowledgements, and checks that recvfrom reports the
 * receiver's address for each acknowledgement. So some datagrams of both senders wait in the receiver's
 * queue, and acknowledgements in the senders', at almost any instant. Each prints one summary line at
 * the end (arrival order between the senders varies from run to run) and exits 1 if any datagram came
 * from another address than its sender's, which is what a restart that queued them again from a socket of
 * its own made them do.
 * usage: udp_sources recv PORT N | udp_sources send PORT ID N */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kSenders = 2, kWindow = 8, kAckEvery = 4, kHeader = 8, kMax = 1400 };

struct header {
  uint8_t id, hello;
  uint16_t pad;
  uint32_t seq;
};

static void nap_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static struct sockaddr_in at(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static int same(const struct sockaddr_in* a, const struct sockaddr_in* b) {
  return a->sin_family == AF_INET && a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
}

/* Datagram seq of sender id: its payload length and bytes after the header. */
static size_t len_of(int id, uint32_t seq) { return (size_t)(seq * 131 + (uint32_t)id * 17) % kMax; }
static uint8_t byte_of(int id, uint32_t seq, size_t k) { return (uint8_t)(seq * 7 + k + (size_t)id * 3); }

static int bound_socket(int port) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = at(port);
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("bind");
    exit(2);
  }
  return s;
}

static ssize_t recv_from(int s, void* b, size_t n, struct sockaddr_in* from) {
  socklen_t l = sizeof *from;
  ssize_t r;
  memset(from, 0, sizeof *from);
  do r = recvfrom(s, b, n, 0, (struct sockaddr*)from, &l);
  while (r < 0 && errno == EINTR);
  return r;
}

static int send_to(int s, const void* b, size_t n, const struct sockaddr_in* to) {
  ssize_t r;
  do r = sendto(s, b, n, 0, (const struct sockaddr*)to, sizeof *to);
  while (r < 0 && errno == EINTR);
  return r == (ssize_t)n ? 0 : -1;
}

static int receiver(int port, uint32_t n) {
  int s = bound_socket(port);
  uint32_t next[kSenders] = {0, 0}, wrong[kSenders] = {0, 0}, bad = 0;
  static uint8_t buf[kHeader + kMax];
  while (next[0] < n || next[1] < n) {
    nap_ms(8);
    struct sockaddr_in from;
    ssize_t r = recv_from(s, buf, sizeof buf, &from);
    struct header h;
    if (r < kHeader) {
      fprintf(stderr, "receiver: recv BROKEN (%zd): %s\n", r, strerror(errno));
      return 1;
    }
    memcpy(&h, buf, sizeof h);
    if (h.id >= kSenders) {
      fprintf(stderr, "receiver: a datagram of no sender (id %u)\n", h.id);
      return 1;
    }
    struct sockaddr_in own = at(port + 1 + h.id);
    if (!same(&from, &own)) {
      ++wrong[h.id];
      fprintf(stderr, "receiver: sender %u's datagram %u came from port %u, not %d\n", h.id, h.seq,
              ntohs(from.sin_port), port + 1 + h.id);
    }
    uint32_t ack = next[h.id];
    if (!h.hello) {
      size_t want = len_of(h.id, h.seq);
      int ok = h.seq == next[h.id] && (size_t)r == kHeader + want;
      for (size_t k = 0; ok && k < want; ++k) ok = buf[kHeader + k] == byte_of(h.id, h.seq, k);
      if (!ok) {
        ++bad;
        fprintf(stderr, "receiver: sender %u's datagram %u (%zd bytes) is not the one expected (%u)\n", h.id, h.seq,
                r, next[h.id]);
      }
      ack = ++next[h.id];
      if (ack % kAckEvery != 0 && ack != n) continue;
    }
    /* To the sender's own address, whatever recvfrom said: a wrong source is counted, not followed. */
    if (send_to(s, &ack, sizeof ack, &own) != 0) {
      fprintf(stderr, "receiver: ack BROKEN: %s\n", strerror(errno));
      return 1;
    }
  }
  printf("receiver: %u datagrams from each of %d senders, %s, %u from another address than their sender's\n", n,
         kSenders, bad ? "SOME OUT OF ORDER OR DAMAGED" : "in order and intact", wrong[0] + wrong[1]);
  return bad || wrong[0] || wrong[1] ? 1 : 0;
}

static int sender(int port, int id, uint32_t n) {
  int s = bound_socket(port + 1 + id);
  struct sockaddr_in to = at(port);
  static uint8_t buf[kHeader + kMax];
  uint32_t acked = 0, wrong = 0;
  int started = 0;
  while (!started) { /* the receiver may not be up yet: hello again until its first acknowledgement */
    struct header h = {(uint8_t)id, 1, 0, 0};
    send_to(s, &h, sizeof h, &to);
    struct pollfd p = {s, POLLIN, 0};
    if (poll(&p, 1, 200) > 0) started = 1;
  }
  for (uint32_t i = 0; i < n || acked < n;) {
    if (i < n && i < acked + kWindow) {
      struct header h = {(uint8_t)id, 0, 0, i};
      size_t len = len_of(id, i);
      memcpy(buf, &h, sizeof h);
      for (size_t k = 0; k < len; ++k) buf[kHeader + k] = byte_of(id, i, k);
      if (send_to(s, buf, kHeader + len, &to) != 0) {
        fprintf(stderr, "sender %d: send %u BROKEN: %s\n", id, i, strerror(errno));
        return 1;
      }
      ++i;
      nap_ms(1);
      continue;
    }
    uint32_t v;
    struct sockaddr_in from;
    if (recv_from(s, &v, sizeof v, &from) != sizeof v) {
      fprintf(stderr, "sender %d: ack BROKEN: %s\n", id, strerror(errno));
      return 1;
    }
    if (!same(&from, &to)) {
      ++wrong;
      fprintf(stderr, "sender %d: an acknowledgement came from port %u, not %d\n", id, ntohs(from.sin_port), port);
    }
    if (v > acked) acked = v;
  }
  printf("sender %d: %u datagrams acknowledged, %u acknowledgements from another address than the receiver's\n", id,
         n, wrong);
  return wrong ? 1 : 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 4 && strcmp(argv[1], "recv") == 0) return receiver(atoi(argv[2]), (uint32_t)atoi(argv[3]));
  if (argc == 5 && strcmp(argv[1], "send") == 0) return sender(atoi(argv[2]), atoi(argv[3]), (uint32_t)atoi(argv[4]));
  fprintf(stderr, "usage: %s recv PORT N | %s send PORT ID N\n", argv[0], argv[0]);
  return 2;
}
