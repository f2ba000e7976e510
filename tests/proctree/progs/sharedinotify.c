/* An inotify instance shared across fork, read by both processes in turn: the parent watches directory d
 * (IN_CLOSE_WRITE) and forks; every round it writes and closes d/f<N>, then on even rounds hands the
 * child a token and the child reads the event from the shared instance, on odd rounds it reads it itself;
 * each reader prints the name it got. The event queue belongs to the one open file description: a restart
 * that gave each process an instance of its own (as before 2026-11-29) leaves in the child's copy the
 * events the parent read, so the child reads a stale name. Output deterministic: "round N child|parent f<N>". */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

/* One event from ino, its name printed as "round N WHO NAME". */
static int read_one(int ino, int r, const char* who) {
  _Alignas(struct inotify_event) char buf[sizeof(struct inotify_event) + NAME_MAX + 1];
  if (read(ino, buf, sizeof buf) <= 0) return -1;
  const struct inotify_event* e = (const struct inotify_event*)buf;
  char line[NAME_MAX + 64];
  int n = snprintf(line, sizeof line, "round %d %s %s\n", r, who, e->len ? e->name : "?");
  return write(1, line, (size_t)n) == n ? 0 : -1;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  mkdir("d", 0700);
  const int ino = inotify_init1(0);
  if (ino < 0 || inotify_add_watch(ino, "d", IN_CLOSE_WRITE) < 0) return 98;
  int tok[2], ans[2]; /* tokens down to the child, answers up */
  if (pipe(tok) != 0 || pipe(ans) != 0) return 97;
  const pid_t c = fork();
  if (c < 0) return 99;
  if (c == 0) {
    for (int r = 0; r < rounds; r += 2) {
      char t;
      if (read(tok[0], &t, 1) != 1 || read_one(ino, r, "child") != 0 || write(ans[1], "a", 1) != 1) _exit(91);
    }
    _exit(0);
  }
  for (int r = 0; r < rounds; ++r) {
    char name[32];
    snprintf(name, sizeof name, "d/f%d", r);
    const int f = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f < 0 || close(f) != 0) return 93;
    char a;
    if (r % 2 == 0) {
      if (write(tok[1], "t", 1) != 1 || read(ans[0], &a, 1) != 1) return 94;
    } else if (read_one(ino, r, "parent") != 0) {
      return 95;
    }
    unlink(name);
    nap(15);
  }
  return reap_and_report(c, rounds, 96);
}
