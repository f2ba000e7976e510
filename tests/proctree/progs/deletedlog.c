/* A parent creates deleted.tmp, unlinks it and forks KIDS children; in turn (kill + sigwaitinfo) all of
 * them write a line to the deleted file through the one description they share (no O_APPEND: one
 * offset). At the end the parent reads the file back through that descriptor and prints it, with its
 * size and the shared offset. If a restart gave each process its own copy of the file, the parent would
 * not see the children's lines written after the restart, and the offsets would split.
 * With the argument "twodesc" the parent also opens a second description of the same inode through
 * /proc/self/fd/N before the forks (inherited by the children, its own offset) and every round prints
 * what it reads through it: that description must come back on the same recreated inode.
 * write(2)/read(2) only, no stdio buffers. Children exit with 10+i. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tree_util.h"

enum { KIDS = 2 };

static void put(int fd, const char* who, int i, int round) {
  char line[96];
  int n = snprintf(line, sizeof line, "%s %d round %d\n", who, i, round);
  if (write(fd, line, (size_t)n) != n) _exit(90);
}

/* Copies what fd reads from its offset on to stdout. */
static void drain(int fd, const char* tag) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) _exit(91);
    if (n == 0) return;
    if (write(1, tag, strlen(tag)) < 0 || write(1, buf, (size_t)n) != n) _exit(92);
  }
}

/* Child k: a line to the deleted file each time the parent signals it, then signals the parent back. */
static int child_turns(int k, int rounds, int log, pid_t parent) {
  for (int r = 0; r < rounds; r++) {
    wait_usr1();
    put(log, "child", k, r);
    kill(parent, SIGUSR1);
  }
  return 10 + k;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 400;
  int twodesc = argc > 2 && strcmp(argv[2], "twodesc") == 0;
  int log = open("deleted.tmp", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) return 98;
  int rd = -1;
  if (twodesc) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", log);
    rd = open(self, O_RDONLY | O_CLOEXEC);
    if (rd < 0) return 96;
  }
  if (unlink("deleted.tmp") != 0) return 95;
  block_usr1();
  pid_t parent = getpid(), kids[KIDS];
  for (int k = 0; k < KIDS; k++) {
    kids[k] = fork();
    if (kids[k] == 0) return child_turns(k, rounds, log, parent);
    if (kids[k] < 0) return 99;
  }
  for (int r = 0; r < rounds; r++) {
    put(log, "parent", 0, r);
    for (int k = 0; k < KIDS; k++) {
      kill(kids[k], SIGUSR1);
      wait_usr1();
    }
    if (twodesc) drain(rd, "seen: ");
    nap(8);
  }
  if (reap_kids(kids, KIDS, -1, 1) != 0) return 97;
  struct stat st;
  if (fstat(log, &st) != 0) return 94;
  char line[128];
  int n = snprintf(line, sizeof line, "links %ld size %lld offset %lld\n", (long)st.st_nlink, (long long)st.st_size,
                   (long long)lseek(log, 0, SEEK_CUR));
  if (write(1, line, (size_t)n) != n) return 93;
  if (lseek(log, 0, SEEK_SET) != 0) return 92;
  drain(log, "");
  return 0;
}
