/* Issue 13: a deleted file one process maps shared and another holds open, in the two ways revive cannot
 * restore as one object (so a checkpoint must fail, naming them, never bring the holder back on a copy):
 *   closed  the parent maps the whole file and closes every descriptor of it; the child holds one
 *   part    the parent maps only the file's second page (and keeps its descriptor); the child holds one
 * The parent makes a file in the cwd, unlinks it, maps it MAP_SHARED and forks; the child unmaps it and
 * takes turns with the parent through that one inode: it pwrite()s round N into the mapped page, the
 * parent sees it through its mapping and answers 2N through the mapping, which the child pread()s. If
 * either stops seeing the other's turn (a copy apart), it says so after 10 s and exits 3.
 * Usage: deleted_mapped closed|part ROUNDS. Output: "ready PARENT CHILD FD NAME" (FD: the child's
 * descriptor, also the parent's in part mode), then one line per turn, then "done 0". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "turns.h"

#define PAGE 4096

int main(int argc, char** argv) {
  if (argc < 3 || (strcmp(argv[1], "closed") != 0 && strcmp(argv[1], "part") != 0))
    return fprintf(stderr, "usage: deleted_mapped closed|part ROUNDS\n"), 1;
  const int part = strcmp(argv[1], "part") == 0;
  long rounds = atol(argv[2]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  char name[64];
  snprintf(name, sizeof name, "mapped.%d.tmp", (int)getpid());
  int fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || unlink(name) != 0 || ftruncate(fd, 2 * PAGE) != 0) return perror("file"), 1;
  /* The page both use: the whole file's first (closed), or the second one alone (part). */
  const off_t base = part ? PAGE : 0;
  const size_t len = part ? PAGE : 2 * PAGE;
  volatile long* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
  if (m == MAP_FAILED) return perror("mmap"), 1;
  const pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {
    munmap((void*)m, len); /* from now on only the descriptor */
    for (long i = 1; i <= rounds; ++i) {
      if (pwrite(fd, &i, sizeof i, base) != sizeof i) return perror("pwrite"), 2;
      long ans = 0;
      for (long t0 = now_ms(); ans != 2 * i; nap(1)) {
        if (pread(fd, &ans, sizeof ans, base + 8) != sizeof ans) return perror("pread"), 2;
        if (ans != 2 * i && now_ms() - t0 > 10000) {
          printf("child: lost the parent at round %ld (reads %ld)\n", i, ans);
          return 3;
        }
      }
      printf("child %ld got %ld\n", i, ans);
      nap(4);
    }
    return 0;
  }
  if (!part) close(fd); /* closed: the parent keeps only its mapping */
  printf("ready %d %d %d %s\n", (int)parent, (int)child, fd, name);
  for (long i = 1; i <= rounds; ++i) {
    if (await_child(m, i, child) != 0) return 3;
    printf("parent %ld\n", i); /* before the answer: the lines come in one order */
    m[1] = 2 * i;
  }
  return reap(child);
}
