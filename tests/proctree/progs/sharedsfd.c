/* A signalfd shared across fork: the parent sets the shared descriptor's mask each round (SIGUSR1 on even
 * rounds, SIGUSR2 on odd ones, with signalfd(fd, mask, 0) on its own descriptor of the description) and
 * passes a token to its child over a pipe; the child, which blocks both signals, raises both, reads the
 * shared signalfd (non-blocking) and prints which signal it got, then takes the other with sigtimedwait and
 * answers. The mask belongs to the one open file description: a restart that gave each process a signalfd
 * of its own (as before 2026-11-29) leaves the child's copy with the mask of the checkpoint's round, so it
 * reads the wrong signal every other round. Output deterministic: the child's "round N got USRk" lines. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

static void put(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  if (write(1, s, n) != (ssize_t)n) _exit(90);
}

static void mask_of(int sig, sigset_t* m) {
  sigemptyset(m);
  sigaddset(m, sig);
}

/* The child: per token from `down`, both signals raised, the shared signalfd read, the other signal taken,
 * one line printed and an answer on `up`. */
static void child(int sfd, int down, int up, int rounds) {
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGUSR1);
  sigaddset(&both, SIGUSR2);
  for (int r = 0; r < rounds; ++r) {
    char t;
    if (read(down, &t, 1) != 1) _exit(91);
    raise(SIGUSR1);
    raise(SIGUSR2);
    struct signalfd_siginfo si;
    const ssize_t n = read(sfd, &si, sizeof si);
    const int got = n == (ssize_t)sizeof si ? (int)si.ssi_signo : 0;
    const struct timespec now = {0, 0};
    while (sigtimedwait(&both, NULL, &now) > 0) { /* the other one, still pending: the next round starts clean */
    }
    char line[64];
    snprintf(line, sizeof line, "round %d got %s\n", r, got == SIGUSR1 ? "USR1" : got == SIGUSR2 ? "USR2" : "nothing");
    put(line);
    if (write(up, "a", 1) != 1) _exit(92);
  }
  _exit(0);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  sigset_t both, m;
  sigemptyset(&both);
  sigaddset(&both, SIGUSR1);
  sigaddset(&both, SIGUSR2);
  if (sigprocmask(SIG_BLOCK, &both, NULL) != 0) return 97;
  mask_of(SIGUSR1, &m);
  const int sfd = signalfd(-1, &m, SFD_NONBLOCK);
  int tok[2], ans[2];  /* tokens down to the child, answers up */
  if (sfd < 0 || pipe(tok) != 0 || pipe(ans) != 0) return 98;
  const pid_t c = fork();
  if (c == 0) child(sfd, tok[0], ans[1], rounds);
  if (c < 0) return 99;
  const struct timespec pause = {0, 15 * 1000 * 1000};
  for (int r = 0; r < rounds; ++r) {
    mask_of(r % 2 ? SIGUSR2 : SIGUSR1, &m);
    if (signalfd(sfd, &m, 0) != sfd) return 93;
    if (write(tok[1], "t", 1) != 1) return 94;
    char a;
    if (read(ans[0], &a, 1) != 1) return 95;
    nanosleep(&pause, NULL);
  }
  return reap_and_report(c, rounds, 96);
}
