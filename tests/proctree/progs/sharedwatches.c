/* An inotify instance shared across fork whose two holders each add a watch of their own after the fork:
 * the child watches directory c, then the parent watches p (IN_CLOSE_WRITE; wds 1 and 2). Every round one
 * of them writes and closes a file in its own directory and the OTHER one reads the event from the shared
 * instance, printing "round N READER NAME wd W" (the watch the other added). At a checkpoint the parent
 * (the instance's owner, whose list the restart restores) knows only the path of its own watch: before
 * 2026-11-29 the checkpoint failed ("watch 1 ... that revive did not see added"); now the child tells it
 * (fd_inotify.cpp). The restored instance must have both watches under the same wds. Deterministic. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tree_util.h"

static int read_one(int ino, int r, const char* who, int own_wd) {
  _Alignas(struct inotify_event) char buf[sizeof(struct inotify_event) + NAME_MAX + 1];
  if (read(ino, buf, sizeof buf) <= 0) return -1;
  const struct inotify_event* e = (const struct inotify_event*)buf;
  if (e->wd == own_wd) return -1; /* the other's file, so the other's watch */
  char line[NAME_MAX + 64];
  int n = snprintf(line, sizeof line, "round %d %s %s wd %d\n", r, who, e->len ? e->name : "?", e->wd);
  return write(1, line, (size_t)n) == n ? 0 : -1;
}

/* Writes and closes DIR/f<r>, tells the other (t), waits for its answer (a). */
static int write_file(const char* dir, int r, int to, int from) {
  char name[32], a;
  snprintf(name, sizeof name, "%s/f%d", dir, r);
  const int f = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f < 0 || close(f) != 0 || write(to, "t", 1) != 1 || read(from, &a, 1) != 1) return -1;
  unlink(name);
  return 0;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  mkdir("p", 0700);
  mkdir("c", 0700);
  const int ino = inotify_init1(0);
  int p2c[2], c2p[2];
  if (ino < 0 || pipe(p2c) != 0 || pipe(c2p) != 0) return 98;
  const pid_t c = fork();
  if (c < 0) return 99;
  char t;
  if (c == 0) {
    const int wc = inotify_add_watch(ino, "c", IN_CLOSE_WRITE);
    if (wc < 0 || write(c2p[1], "r", 1) != 1) _exit(90);
    for (int r = 0; r < rounds; ++r) {
      if (r % 2 == 0) {
        if (write_file("c", r, c2p[1], p2c[0]) != 0) _exit(91);
      } else if (read(p2c[0], &t, 1) != 1 || read_one(ino, r, "child", wc) != 0 || write(c2p[1], "a", 1) != 1) {
        _exit(92);
      }
      nap(10);
    }
    _exit(0);
  }
  if (read(c2p[0], &t, 1) != 1) return 97;
  const int wp = inotify_add_watch(ino, "p", IN_CLOSE_WRITE);
  if (wp < 0) return 96;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 1) {
      if (write_file("p", r, p2c[1], c2p[0]) != 0) return 95;
    } else if (read(c2p[0], &t, 1) != 1 || read_one(ino, r, "parent", wp) != 0 || write(p2c[1], "a", 1) != 1) {
      return 94;
    }
    nap(10);
  }
  return reap_and_report(c, rounds, 93);
}
