/* A pseudo-terminal pair held whole by one process, checkpointed standalone (no coordinator):
 * `pty_alone N PACE_US`. The master is held at two numbers (dup), the slave at two and opened a second
 * time write-only (its own description); the slave's termios has output processing off (no \r is
 * added: a fresh pair would add one) and the window is 33x77. Each line is written through one of the
 * slave's descriptors, and the master is read only after every 4th line, so written output waits in the
 * pair at most moments. Prints what the master reads (\r and all), then, once every slave descriptor is
 * closed, what the next master read gives (EIO), the window size and a checksum. A pair reopened by path
 * (a fresh master, /dev/pts/N of another pair or a stand-in), or output lost at a checkpoint, changes the
 * output or blocks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "pty_open.h"

static uint64_t sum = 1469598103934665603ull;
static long lines_read;

/* Reads what the master has until `want` lines have come (blocking reads: they have been written). */
static void read_lines(int m, long want) {
  char buf[4096];
  while (lines_read < want) {
    ssize_t r = read(m, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      printf("master read failed after %ld lines: %s\n", lines_read, r < 0 ? strerror(errno) : "end of file");
      exit(1);
    }
    for (ssize_t k = 0; k < r; k++) {
      sum = (sum ^ (uint8_t)buf[k]) * 1099511628211ull;
      if (buf[k] == '\n') lines_read++;
    }
    fwrite(buf, 1, (size_t)r, stdout);
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long n = atol(argv[1]), pace_us = atol(argv[2]);
  char name[64];
  int m = open_pty_master(name, sizeof name);
  if (m < 0) return 3;
  int s = open(name, O_RDWR | O_NOCTTY);
  int m2 = dup(m), s2 = dup(s), sw = open(name, O_WRONLY | O_NOCTTY);
  if (s < 0 || m2 < 0 || s2 < 0 || sw < 0) return 4;
  struct termios t;
  tcgetattr(s, &t);
  t.c_oflag &= ~(tcflag_t)OPOST;
  tcsetattr(s, TCSANOW, &t);
  struct winsize ws = {33, 77, 0, 0};
  ioctl(m, TIOCSWINSZ, &ws);
  const int out[3] = {s, s2, sw};
  for (long i = 0; i < n; i++) {
    char line[80];
    int len = snprintf(line, sizeof line, "line %ld through the slave\n", i);
    if (write(out[i % 3], line, (size_t)len) != len) {
      printf("slave write %ld failed: %s\n", i, strerror(errno));
      return 1;
    }
    if (i % 4 == 3) read_lines(i % 2 ? m : m2, i + 1);
    struct timespec ts = {0, pace_us * 1000};
    nanosleep(&ts, NULL);
  }
  read_lines(m, n);
  close(s);
  close(s2);
  close(sw);
  char c;
  ssize_t r = read(m, &c, 1);
  printf("after the slave closed: %s\n", r < 0 ? strerror(errno) : r == 0 ? "end of file" : "a byte");
  struct winsize got = {0, 0, 0, 0};
  ioctl(m, TIOCGWINSZ, &got);
  printf("window %ux%u, %ld lines, checksum %016llx\n", got.ws_row, got.ws_col, lines_read,
         (unsigned long long)sum);
  return 0;
}
