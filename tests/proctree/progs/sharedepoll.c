/* An epoll instance shared across fork whose interest list the parent changes: every round the parent makes
 * an eventfd the child never holds, registers it in the shared epoll with the round as its data, makes it
 * readable and hands the child a token over a pipe; the child waits on the shared epoll and prints the data
 * of the event it gets, then answers; the parent removes that eventfd at the next round's start (dup2 then
 * closes it). The interest
 * list belongs to the one open file description: a restart that gave each process an epoll of its own (as
 * before 2026-11-29) leaves the child's copy without the parent's later registrations, so its waits time out.
 * The parent registers its eventfd under number 20, and the child holds a readable eventfd of its own at 20
 * that it never registers: both are anonymous inodes of one inode number, so only a comparison of the very
 * files (kcmp KCMP_EPOLL_TFD) keeps the child from registering its own at the restore, where it would
 * answer every later wait. Output deterministic: the child's "round N event N" lines, the parent's total. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

static void put(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  if (write(1, s, n) != (ssize_t)n) _exit(90);
}

/* The child: per token from `down`, one wait on the shared epoll (0.3 s at most), a line, an answer on `up`. */
static void child(int ep, int down, int up, int rounds) {
  const int own = eventfd(1, 0); /* readable, never registered */
  if (own < 0 || dup2(own, 20) != 20) _exit(93);
  close(own);
  for (int r = 0; r < rounds; ++r) {
    char t;
    if (read(down, &t, 1) != 1) _exit(91);
    struct epoll_event ev;
    const int n = epoll_wait(ep, &ev, 1, 300);
    char line[64];
    if (n == 1)
      snprintf(line, sizeof line, "round %d event %llu\n", r, (unsigned long long)ev.data.u64);
    else
      snprintf(line, sizeof line, "round %d no event\n", r);
    put(line);
    if (write(up, "a", 1) != 1) _exit(92);
  }
  _exit(0);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  const int ep = epoll_create1(0);
  int tok[2], ans[2];  /* tokens down to the child, answers up */
  if (ep < 0 || pipe(tok) != 0 || pipe(ans) != 0) return 98;
  const pid_t c = fork();
  if (c == 0) child(ep, tok[0], ans[1], rounds);
  if (c < 0) return 99;
  close(tok[0]);
  close(ans[1]);
  const struct timespec pause = {0, 15 * 1000 * 1000};
  for (int r = 0; r < rounds; ++r) {
    /* The last round's eventfd stays registered through its pause (where checkpoints mostly land). */
    if (r > 0 && epoll_ctl(ep, EPOLL_CTL_DEL, 20, NULL) != 0) return 96;
    const int made = eventfd(0, EFD_CLOEXEC);
    const int x = made < 0 ? -1 : dup2(made, 20); /* the number the child's own eventfd has */
    if (made >= 0) close(made);
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = (uint64_t)r;
    const uint64_t one = 1;
    if (x != 20 || epoll_ctl(ep, EPOLL_CTL_ADD, x, &ev) != 0 || write(x, &one, sizeof one) != sizeof one) return 93;
    if (write(tok[1], "t", 1) != 1) return 94;
    char a;
    if (read(ans[0], &a, 1) != 1) return 95;
    nanosleep(&pause, NULL);
  }
  return reap_and_report(c, rounds, 97);
}
