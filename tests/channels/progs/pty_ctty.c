/* A pseudo-terminal as a child's controlling terminal, as `script`, `expect` or `ssh -t` run a shell:
 * `pty_ctty N PACE_US`. The parent opens a pty and forks; the child starts a session (setsid), opens the
 * slave, which becomes its controlling terminal, starts a process group of its own and makes it the
 * terminal's foreground group, the way a job-control shell runs a job. Each of its N paced lines says
 * whether /dev/tty opens (the process has a controlling terminal), names that terminal's foreground group
 * relative to its own, and whether it is the session leader. The parent prints the lines it reads from the
 * master (the pty's \r dropped). A restart that did not give the session its terminal back, or not the
 * foreground group, changes the lines. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "pty_open.h"

int main(int argc, char** argv) {
  char name[64];
  const int m = open_pty_master(name, sizeof name);
  if (argc < 3 || m < 0) return 2;
  const long n = atol(argv[1]);
  const long pace_us = atol(argv[2]);
  pid_t kid = fork();
  if (kid < 0) return 4;
  if (kid == 0) {
    close(m);
    if (setsid() < 0) return 5;
    int s = open(name, O_RDWR);  /* no O_NOCTTY: the session's controlling terminal */
    if (s < 0) return 6;
    dup2(s, 1);
    if (s != 1) close(s);
    setpgid(0, 0);  /* already the session's group; a job-control shell's own group */
    if (tcsetpgrp(1, getpgrp()) != 0) return 7;
    for (long i = 0; i < n; i++) {
      int t = open("/dev/tty", O_RDWR | O_CLOEXEC);
      pid_t fg = tcgetpgrp(1);
      printf("line %ld: /dev/tty %s, foreground %s, %s\n", i, t >= 0 ? "opens" : strerror(errno),
             fg == getpgrp() ? "is our group" : fg < 0 ? strerror(errno) : "is another group",
             getsid(0) == getpid() ? "session leader" : "not the session leader");
      if (t >= 0) close(t);
      fflush(stdout);
      struct timespec ts = {0, pace_us * 1000};
      nanosleep(&ts, NULL);
    }
    return 0;
  }
  char buf[4096];
  for (;;) {
    ssize_t r = read(m, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* EIO: the slave is closed everywhere (the child ended) */
    for (ssize_t k = 0; k < r; k++)
      if (buf[k] != '\r') putchar(buf[k]);
    fflush(stdout);
  }
  int st = 0;
  waitpid(kid, &st, 0);
  printf("parent: child status %d\n", st);
  return 0;
}
