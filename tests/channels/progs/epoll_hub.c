/* A server multiplexing several TCP clients and a pipe with epoll (level-triggered):
 *   epoll_hub hub PORT K BYTES PACE_US      forks a child that streams BYTES into a pipe, accepts K
 *                                           clients, watches them (EPOLLIN|EPOLLRDHUP, data 0x1000+id)
 *                                           and the pipe's read end (EPOLLIN, data 0x77) with one epoll
 *                                           instance, checks every stream and echoes the clients'
 *   epoll_hub client PORT ID BYTES PACE_US  connects, sends its id (1..K), streams BYTES and checks the echo
 * The hub dispatches on the registration's data only, rejects unknown data or events, and gives up when
 * epoll_wait reports nothing for 30 s, so registrations that do not survive a restart fail the run. Its
 * output (one line per source, in a fixed order) does not depend on scheduling. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "net_util.h"

#define MAXK 16
static unsigned pace_us;

struct source {
  int fd;
  uint64_t seed, got, sum;
  int done, rdhup;
};

static int hub(int port, int k) {
  int p[2];
  if (pipe(p) != 0) die("pipe");
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    close(p[0]);
    send_stream(p[1], 99, pace_us);
    _exit(0);
  }
  close(p[1]);
  int l = listen_loopback(port, 16);
  struct source src[MAXK + 1];
  memset(src, 0, sizeof src);
  int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  for (int i = 0; i < k; ++i) {
    int s = accept(l, NULL, NULL);
    uint8_t id = 0;
    if (s < 0 || read_some(s, &id, 1) != 1 || id < 1 || id > k || src[id].fd) die("accept a client");
    src[id].fd = s;
    src[id].seed = id;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = 0x1000u + id};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0) die("epoll_ctl");
  }
  src[0].fd = p[0];
  src[0].seed = 99;
  struct epoll_event pev = {.events = EPOLLIN, .data.u64 = 0x77};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &pev) != 0) die("epoll_ctl pipe");
  static uint8_t buf[1 << 16];
  for (int left = k + 1; left > 0;) {
    struct epoll_event evs[8];
    int n = epoll_wait(ep, evs, 8, 30000);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("epoll_wait");
    if (n == 0) {
      fprintf(stderr, "hub: epoll_wait reported nothing for 30 s with %d sources left\n", left);
      return 1;
    }
    for (int e = 0; e < n; ++e) {
      uint64_t d = evs[e].data.u64;
      uint32_t got_ev = evs[e].events;
      int id = d == 0x77 ? 0 : (d > 0x1000 && d <= 0x1000u + (uint64_t)k) ? (int)(d - 0x1000) : -1;
      uint32_t allowed = id == 0 ? (EPOLLIN | EPOLLHUP) : (EPOLLIN | EPOLLRDHUP | EPOLLHUP);
      if (id < 0 || (got_ev & ~allowed) || src[id].done) {
        fprintf(stderr, "hub: unexpected event: data %#llx events %#x\n", (unsigned long long)d, got_ev);
        return 1;
      }
      struct source* s = &src[id];
      if (got_ev & EPOLLRDHUP) s->rdhup = 1;
      int r = read_some(s->fd, buf, sizeof buf);
      for (int i = 0; i < r; ++i) {
        if (buf[i] != seq_byte(s->seed, s->got + (uint64_t)i)) {
          fprintf(stderr, "hub: source %d byte %llu wrong\n", id, (unsigned long long)(s->got + (uint64_t)i));
          return 1;
        }
        s->sum = s->sum * 31 + buf[i];
      }
      if (id && r > 0) write_all(s->fd, buf, (size_t)r);
      s->got += (uint64_t)r;
      if (r == 0) {
        if (s->got != total) {
          fprintf(stderr, "hub: source %d ended after %llu bytes\n", id, (unsigned long long)s->got);
          return 1;
        }
        epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
        s->done = 1;
        --left;
      }
    }
  }
  for (int id = 0; id <= k; ++id)
    printf("source %d: %llu bytes checksum %llu%s\n", id, (unsigned long long)src[id].got,
           (unsigned long long)src[id].sum, id && src[id].rdhup ? " (closed: EPOLLRDHUP)" : "");
  int st = 0;
  if (waitpid(child, &st, 0) != child) die("waitpid");
  printf("pipe writer exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

static int fd_arg;
static uint8_t my_id;

static void* sender(void* arg) {
  (void)arg;
  send_stream(fd_arg, my_id, pace_us);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: epoll_hub hub PORT K BYTES PACE_US | epoll_hub client PORT ID BYTES PACE_US\n");
    return 2;
  }
  int port = atoi(argv[2]), k = atoi(argv[3]);
  total = strtoull(argv[4], NULL, 10);
  pace_us = (unsigned)atoi(argv[5]);
  if (k < 1 || k > MAXK) return 2;
  if (strcmp(argv[1], "hub") == 0) return hub(port, k);
  int s = connect_loopback(port);
  my_id = (uint8_t)k;
  write_all(s, &my_id, 1);
  fd_arg = s;
  pthread_t t;
  pthread_create(&t, NULL, sender, NULL);
  char who[32];
  snprintf(who, sizeof who, "client %d", k);
  check_stream(s, who, my_id, 0);
  pthread_join(t, NULL);
  close(s);
  return 0;
}
