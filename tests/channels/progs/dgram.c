/* Message sockets between processes: N messages of varying length (0..2999 bytes would include empty
 * ones; here 1..3000) whose contents depend on their number go one way, are checked (length, content,
 * order) and echoed, and the echo is checked; boundaries must survive checkpoints and restarts.
 *   dgram pair dgram|seqpacket N PACE_US   a socketpair across fork: the child checks and echoes, sleeping
 *                                          PACE_US after each message so its queue is often full; only
 *                                          the parent prints
 *   dgram bound DIR a|b N PACE_US          two processes, SOCK_DGRAM sockets bound to DIR/a and DIR/b and
 *                                          connected to each other: a sends, b checks and echoes
 *   dgram named DIR a|b N PACE_US [abstract]  the same, not connected: every message goes by sendto() to the
 *                                          peer's name (DIR/a, or the abstract name "DIR/a"), as UCX's
 *                                          ranks do; queued messages must survive */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "net_util.h"

static uint64_t count;
static unsigned pace_us;
static int sock;
static int unconnected;            /* named mode: sendto() the peer's name */
static struct sockaddr_un g_peer;
static socklen_t g_peer_len;

static ssize_t send_msg(const void* p, size_t n) {
  return unconnected ? sendto(sock, p, n, 0, (struct sockaddr*)&g_peer, g_peer_len) : send(sock, p, n, 0);
}

static size_t msg_len(uint64_t i) { return 1 + (size_t)((i * 7919) % 3000); }

static void make(uint64_t i, uint8_t* buf) {
  for (size_t k = 0; k < msg_len(i); ++k) buf[k] = seq_byte(i, k);
}

static void* sender(void* arg) {
  (void)arg;
  static uint8_t buf[4096];
  for (uint64_t i = 0; i < count; ++i) {
    make(i, buf);
    for (;;) {
      ssize_t w = send_msg(buf, msg_len(i));
      if (w < 0 && (errno == EINTR || errno == ECONNREFUSED || errno == EAGAIN)) { /* peer not bound yet, full */
        usleep(1000);
        continue;
      }
      if (w != (ssize_t)msg_len(i)) die("send");
      break;
    }
  }
  return NULL;
}

/* Receives count messages, checks each; echo: sends it back. Returns a checksum. */
static uint64_t check(const char* who, int echo, unsigned pace) {
  static uint8_t buf[8192], want[4096];
  uint64_t sum = 0;
  for (uint64_t i = 0; i < count; ++i) {
    ssize_t r;
    do r = recv(sock, buf, sizeof buf, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0) die("recv");
    make(i, want);
    if ((size_t)r != msg_len(i) || memcmp(buf, want, (size_t)r) != 0) {
      fprintf(stderr, "%s: message %llu has %zd bytes (want %zu) or wrong content\n", who,
              (unsigned long long)i, r, msg_len(i));
      exit(1);
    }
    for (ssize_t k = 0; k < r; ++k) sum = sum * 31 + buf[k];
    if (echo) {
      ssize_t w;
      do w = send_msg(buf, (size_t)r);
      while (w < 0 && (errno == EINTR || errno == EAGAIN));
      if (w != r) die("echo");
    }
    if (pace) usleep(pace);
  }
  return sum;
}

/* DIR/name as a path, or (abstract) as the abstract name "DIR/name"; returns the address length. */
static socklen_t name_of(struct sockaddr_un* a, const char* dir, const char* name, int abstract) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  snprintf(a->sun_path + (abstract ? 1 : 0), sizeof a->sun_path - 1, "%s/%s", dir, name);
  return abstract ? (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a->sun_path + 1))
                  : (socklen_t)sizeof *a;
}

static void bind_to(int s, const char* dir, const char* name, struct sockaddr_un* a) {
  name_of(a, dir, name, 0);
  unlink(a->sun_path);
  if (bind(s, (struct sockaddr*)a, sizeof *a) != 0) die("bind");
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: dgram pair dgram|seqpacket N PACE_US | dgram bound DIR a|b N PACE_US\n");
    return 2;
  }
  if (strcmp(argv[1], "pair") == 0) {
    count = strtoull(argv[3], NULL, 10);
    pace_us = (unsigned)atoi(argv[4]);
    pid_t child = fork_pair(strcmp(argv[2], "seqpacket") == 0 ? SOCK_SEQPACKET : SOCK_DGRAM, &sock);
    if (child == 0) {
      check("child", 1, pace_us);
      _exit(0);
    }
    pthread_t t;
    pthread_create(&t, NULL, sender, NULL);
    uint64_t sum = check("parent", 0, 0);
    pthread_join(t, NULL);
    int st = 0;
    if (waitpid(child, &st, 0) != child) die("waitpid");
    printf("parent: %llu %s messages echoed, checksum %llu\nchild exit %d\n", (unsigned long long)count, argv[2],
           (unsigned long long)sum, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return 0;
  }
  if (argc < 6) return 2;
  const int is_a = strcmp(argv[3], "a") == 0;
  count = strtoull(argv[4], NULL, 10);
  pace_us = (unsigned)atoi(argv[5]);
  sock = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un me;
  if (strcmp(argv[1], "named") == 0) {
    unconnected = 1;
    const int abstract = argc > 6 && strcmp(argv[6], "abstract") == 0;
    socklen_t ml = name_of(&me, argv[2], is_a ? "a" : "b", abstract);
    if (!abstract) unlink(me.sun_path);
    if (bind(sock, (struct sockaddr*)&me, ml) != 0) die("bind");
    g_peer_len = name_of(&g_peer, argv[2], is_a ? "b" : "a", abstract);
  } else {
    struct sockaddr_un peer;
    bind_to(sock, argv[2], is_a ? "a" : "b", &me);
    name_of(&peer, argv[2], is_a ? "b" : "a", 0);
    for (int tries = 0; connect(sock, (struct sockaddr*)&peer, sizeof peer) != 0; ++tries) {
      if (tries > 500) die("connect");
      usleep(10000);
    }
  }
  /* Both ready before any message: b tells a (a's first recv), a answers with the stream. */
  if (is_a) {
    uint8_t go;
    if (recv(sock, &go, 1, 0) != 1) die("recv hello");
    pthread_t t;
    pthread_create(&t, NULL, sender, NULL);
    uint64_t sum = check("a", 0, 0);
    pthread_join(t, NULL);
    printf("a: %llu messages echoed, checksum %llu\n", (unsigned long long)count, (unsigned long long)sum);
    return 0;
  }
  for (int tries = 0;; ++tries) {
    uint8_t hello = 'h';
    if (send_msg(&hello, 1) == 1) break;
    if (tries > 1000) die("hello");
    usleep(10000); /* a not bound (or not connected to us) yet: retry */
  }
  uint64_t sum = check("b", 1, pace_us);
  printf("b: %llu messages checked, checksum %llu\n", (unsigned long long)count, (unsigned long long)sum);
  return 0;
}
