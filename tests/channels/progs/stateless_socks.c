/* Sockets the chan plugin does not rebuild, which revive makes again (src/plugins/fd/fd_socket.cpp):
 * a connected UDP pair between this process and its child (bound ports, a ping-pong every step), a
 * netlink route socket (a link dump every 10 steps), an unbound UDP socket and an unconnected TCP socket
 * (used only at the end), and a Unix stream whose peer closed with bytes still unread. Output is the same with or without a checkpoint; a /dev/null stand-in would show as a
 * "BROKEN" line.   usage: stateless_socks PORT STEPS */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
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

static int udp_bound(int port) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("bind udp");
    exit(2);
  }
  return s;
}

static void udp_connect(int s, int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("connect udp");
    exit(2);
  }
}

/* recv that retries EINTR (the checkpoint signal). */
static ssize_t recv_r(int s, void* b, size_t n, int fl) {
  ssize_t r;
  do r = recv(s, b, n, fl);
  while (r < 0 && errno == EINTR);
  return r;
}

/* A link dump over the netlink socket: 1 if it ends with NLMSG_DONE. */
static int link_dump(int nl, unsigned seq) {
  struct {
    struct nlmsghdr h;
    struct ifinfomsg i;
  } req = {.h = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_GETLINK, .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                 .nlmsg_seq = seq},
           .i = {.ifi_family = AF_UNSPEC}};
  if (send(nl, &req, sizeof req, 0) != (ssize_t)sizeof req) return 0;
  static char buf[1 << 16];
  for (;;) {
    ssize_t n = recv_r(nl, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    for (struct nlmsghdr* h = (struct nlmsghdr*)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != seq) continue;
      if (h->nlmsg_type == NLMSG_DONE) return 1;
      if (h->nlmsg_type == NLMSG_ERROR) return 0;
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PORT STEPS\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]), steps = atoi(argv[2]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int a = udp_bound(port), b = udp_bound(port + 1);
  udp_connect(a, port + 1);
  udp_connect(b, port);
  pid_t child = fork();
  if (child == 0) {  /* echoes every datagram doubled until "end" */
    close(a);
    char m[32];
    for (;;) {
      ssize_t n = recv_r(b, m, sizeof m - 1, 0);
      if (n <= 0) _exit(3);
      m[n] = 0;
      if (strcmp(m, "end") == 0) _exit(0);
      char r[32];
      int k = snprintf(r, sizeof r, "%ld", 2 * atol(m));
      if (send(b, r, k, 0) != k) _exit(4);
    }
  }
  close(b);

  int nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
  struct sockaddr_nl me = {.nl_family = AF_NETLINK};
  if (nl < 0 || bind(nl, (struct sockaddr*)&me, sizeof me) != 0) {
    perror("netlink");
    return 2;
  }
  int fresh_udp = socket(AF_INET, SOCK_DGRAM, 0);
  int fresh_tcp = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fresh_tcp, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  const char widow[] = "bytes sent before the peer closed";
  if (write(sv[1], widow, sizeof widow - 1) != (ssize_t)sizeof widow - 1) return 2;
  close(sv[1]);

  for (int i = 0; i < steps; i++) {
    char m[32], r[32];
    int k = snprintf(m, sizeof m, "%d", i);
    if (send(a, m, k, 0) != k) {
      printf("step %d: udp send BROKEN (%s)\n", i, strerror(errno));
      return 1;
    }
    ssize_t n = recv_r(a, r, sizeof r - 1, 0);
    if (n <= 0) {
      printf("step %d: udp reply BROKEN (%zd)\n", i, n);
      return 1;
    }
    r[n] = 0;
    printf("step %d: udp %s -> %s\n", i, m, r);
    if (i % 10 == 9) printf("step %d: netlink link dump %s\n", i, link_dump(nl, (unsigned)i + 1) ? "ok" : "BROKEN");
    nap_ms(8);
  }
  send(a, "end", 3, 0);
  int st = 0;
  waitpid(child, &st, 0);
  printf("child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));

  /* The sockets nothing used since: still sockets of their kinds. */
  int sink = udp_bound(port + 2);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port + 2), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  char got[16] = "";
  int ok = sendto(fresh_udp, "hi", 2, 0, (struct sockaddr*)&to, sizeof to) == 2 && recv_r(sink, got, sizeof got, 0) == 2;
  printf("unbound udp: %s\n", ok ? "ok" : "BROKEN");
  int tl = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(tl, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  to.sin_port = htons(port + 3);
  ok = bind(tl, (struct sockaddr*)&to, sizeof to) == 0 && listen(tl, 1) == 0 &&
       connect(fresh_tcp, (struct sockaddr*)&to, sizeof to) == 0;
  int nd = 0;
  socklen_t nl_len = sizeof nd;
  getsockopt(fresh_tcp, IPPROTO_TCP, 1 /* TCP_NODELAY */, &nd, &nl_len);
  printf("unconnected tcp: %s, nodelay %d\n", ok ? "ok" : "BROKEN", nd != 0);
  char w[64] = "";
  ssize_t wn = recv_r(sv[0], w, sizeof w - 1, 0);
  ssize_t eof = recv_r(sv[0], got, sizeof got, 0);
  printf("widowed stream: '%s', then %s\n", wn > 0 ? w : "BROKEN", eof == 0 ? "EOF" : "BROKEN");
  return 0;
}
