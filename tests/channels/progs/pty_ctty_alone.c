/* A pseudo-terminal pair held whole by one process that leads a session with the slave as its controlling
 * terminal, checkpointed standalone (no coordinator): `pty_ctty_alone N PACE_US`. The process starts a
 * session (setsid), opens a pty's slave without O_NOCTTY (it becomes the session's terminal, the
 * process's group its foreground group). Each of its N paced lines says whether /dev/tty opens, whether
 * the terminal's foreground group is its own group, whether it leads its session and whether the slave
 * is its controlling terminal (TIOCGSID); the line goes through the slave and is printed as the master
 * reads it (\r dropped). A restart that rebuilt the pair but not the session's terminal changes the lines. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "pty_open.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const long n = atol(argv[1]), pace_us = atol(argv[2]);
  if (setsid() < 0) return 5; /* the driver starts it as a plain child, not a group leader */
  char name[64];
  const int m = open_pty_master(name, sizeof name);
  if (m < 0) return 3;
  const int s = open(name, O_RDWR); /* no O_NOCTTY: the session's controlling terminal */
  if (s < 0) return 4;
  if (tcgetpgrp(s) != getpgrp()) return 6;
  char line[256], buf[4096];
  for (long i = 0; i < n; i++) {
    int t = open("/dev/tty", O_RDWR | O_CLOEXEC);
    const int tty_err = errno;
    pid_t fg = tcgetpgrp(s);
    const int fg_err = errno;
    pid_t sid = 0;
    int ctty = ioctl(s, TIOCGSID, &sid) == 0 && sid == getsid(0);
    int len = snprintf(line, sizeof line, "line %ld: /dev/tty %s, foreground %s, %s, %s\n", i,
                       t >= 0 ? "opens" : strerror(tty_err),
                       fg == getpgrp() ? "is our group" : fg < 0 ? strerror(fg_err) : "is another group",
                       getsid(0) == getpid() ? "session leader" : "not the session leader",
                       ctty ? "our controlling terminal" : "not our controlling terminal");
    if (t >= 0) close(t);
    if (write(s, line, (size_t)len) != len) return 7;
    /* Read back the line from the master (blocking: it has been written). */
    for (int got_nl = 0; !got_nl;) {
      ssize_t r = read(m, buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        printf("master read failed after line %ld: %s\n", i, r < 0 ? strerror(errno) : "end of file");
        return 8;
      }
      for (ssize_t k = 0; k < r; k++) {
        if (buf[k] == '\n') got_nl = 1;
        if (buf[k] != '\r') putchar(buf[k]);
      }
    }
    fflush(stdout);
    struct timespec ts = {pace_us / 1000000, (pace_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}
