// An inotify user for the engine's inotify support (fd plugin, fd_inotify.cpp): watches its working
// directory and files it changes there itself, and after every change reads exactly the events that change causes, printing
// each (wd, mask, name). Under checkpoints, kills and restarts its output must equal an uninterrupted
// run's: the same wds (the kernel's counter moved on by removed watches too), no event lost or added.
// Also exercised: a watch whose file was renamed after it was added (found again through the descriptor
// the program holds), a watch removed and a newer one added every few steps, IN_ONESHOT.
// LAG_MS (optional) sleeps between the log's change and the read of its event, once per step, so that
// checkpoints land on an event not yet read (refused for now, taken again a moment later) about a third
// of the time: a checkpoint refused 13 times in a row fails.
//   inotify_watch STEPS [LAG_MS]
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int in;
static int lag_ms;

static void die(const char* what) {
  perror(what);
  exit(2);
}

// Reads events until `want` have come, printing each; a blocking read, as tail -f does.
static void expect(int step, int want, int lag) {
  if (lag) {
    struct timespec ts = {0, lag_ms * 1000L * 1000L};
    nanosleep(&ts, NULL);
  }
  static char buf[4096] __attribute__((aligned(8)));
  static int have, used;
  while (want > 0) {
    if (used == have) {
      ssize_t n = read(in, buf, sizeof buf);
      if (n <= 0) die("read inotify");
      have = (int)n;
      used = 0;
    }
    const struct inotify_event* e = (const struct inotify_event*)(buf + used);
    used += (int)(sizeof *e + e->len);
    printf("%d wd=%d mask=%x name=%s%s\n", step, e->wd, e->mask, e->len ? e->name : "-", e->cookie ? " cookie" : "");
    --want;
  }
  if (used != have) {  // an event nobody asked for
    const struct inotify_event* e = (const struct inotify_event*)(buf + used);
    printf("%d UNEXPECTED wd=%d mask=%x\n", step, e->wd, e->mask);
    exit(3);
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 200;
  lag_ms = argc > 2 ? atoi(argv[2]) : 0;
  int log = open("log.txt", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) die("open log");
  in = inotify_init1(IN_CLOEXEC);
  if (in < 0) die("inotify_init1");
  int wdir = inotify_add_watch(in, ".", IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO);
  int wlog = inotify_add_watch(in, "log.txt", IN_MODIFY);
  int gap = inotify_add_watch(in, "/", IN_ATTRIB);  // a wd handed out and given back
  if (wdir < 0 || wlog < 0 || gap < 0 || inotify_rm_watch(in, gap) != 0) die("inotify_add_watch");
  expect(-1, 1, 0);  // its IN_IGNORED
  printf("watches dir=%d log=%d gap=%d\n", wdir, wlog, gap);
  int wcur = -1;
  char name[64], old[64];
  for (int i = 0; i < steps; ++i) {
    char line[64];
    int n = snprintf(line, sizeof line, "line %d\n", i);
    if (write(log, line, (size_t)n) != n) die("write log");
    expect(i, 1, 1);  // IN_MODIFY on the log, whatever its name now
    snprintf(name, sizeof name, "f%d", i);
    int f = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f < 0) die("create");
    close(f);
    expect(i, 1, 0);  // IN_CREATE
    if (i % 5 == 0) {
      if (wcur >= 0) {
        if (inotify_rm_watch(in, wcur) != 0) die("inotify_rm_watch");
        expect(i, 1, 0);  // IN_IGNORED
      }
      wcur = inotify_add_watch(in, name, IN_ATTRIB | (i % 10 == 0 ? IN_ONESHOT : 0));
      if (wcur < 0) die("inotify_add_watch f");
      strcpy(old, name);
      if (chmod(old, 0600 + (i % 2) * 040) != 0) die("chmod");
      expect(i, i % 10 == 0 ? 2 : 1, 0);  // IN_ATTRIB (and IN_IGNORED after a one-shot)
      if (i % 10 == 0) wcur = -1;
    }
    if (i % 7 == 3) {
      snprintf(name, sizeof name, "log-%d.txt", i);
      char from[64];
      snprintf(from, sizeof from, "log-%d.txt", i - 7);
      if (rename(i == 3 ? "log.txt" : from, name) != 0) die("rename");
      expect(i, 2, 0);  // IN_MOVED_FROM, IN_MOVED_TO
    }
    if (i > 0 && (i - 1) % 5 != 0) {
      snprintf(name, sizeof name, "f%d", i - 1);
      if (unlink(name) != 0) die("unlink");
      expect(i, 1, 0);  // IN_DELETE
    }
    struct timespec ts = {0, 15 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  printf("done\n");
  return 0;
}
