/* Issue 13: a deleted file one process maps shared while another only holds it open. The parent makes a
 * file in the cwd, unlinks it, maps it MAP_SHARED and forks; the child unmaps it and keeps only the
 * descriptor (the parent keeps its own too). They take turns through that one inode: the child pwrite()s round N at offset 0, the
 * parent sees it in its mapping and answers 2N at offset 8 through the mapping, which the child pread()s.
 * If a restart gives the child's descriptor a copy of its own, neither sees the other's turn again and
 * both report the loss after 10 s (exit 3). The child also write()s each round through the description
 * they share (inherited) at a varying offset: the parent checks lseek() shows where the child left it, so a
 * restart that splits that description fails too (exit 3). Usage: deleted_split ROUNDS. Output: one line per turn. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "turns.h"

/* Where the child's write() of round i goes: 16..264, so the shared offset differs from round to round. */
static long slot(long i) { return 16 + 8 * (i % 32); }

int main(int argc, char** argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 200;
  setvbuf(stdout, NULL, _IOLBF, 0);
  char name[64];
  snprintf(name, sizeof name, "split.%d.tmp", (int)getpid());
  int fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || unlink(name) != 0 || ftruncate(fd, 4096) != 0) return perror("file"), 1;
  volatile long* m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return perror("mmap"), 1;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {
    munmap((void*)m, 4096); /* from now on only the descriptor */
    for (long i = 1; i <= rounds; ++i) {
      /* Through the offset the parent shares (one inherited description): it must see where this left it. */
      if (lseek(fd, slot(i), SEEK_SET) < 0 || write(fd, &i, sizeof i) != sizeof i) return perror("write"), 2;
      if (pwrite(fd, &i, sizeof i, 0) != sizeof i) return perror("pwrite"), 2;
      long ans = 0;
      for (long t0 = now_ms(); ans != 2 * i; nap(2)) {
        if (pread(fd, &ans, sizeof ans, 8) != sizeof ans) return perror("pread"), 2;
        if (ans != 2 * i && now_ms() - t0 > 10000) {
          printf("child: lost the parent at round %ld (reads %ld)\n", i, ans);
          return 3;
        }
      }
      printf("child %ld got %ld\n", i, ans);
      nap(5);
    }
    return 0;
  }
  /* The parent keeps its descriptor too (never used): the case the fd plugin stores as shared memory. */
  for (long i = 1; i <= rounds; ++i) {
    if (await_child(m, i, child) != 0) return 3;
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (at != slot(i) + 8 || m[slot(i) / 8] != i) {
      printf("parent: round %ld: shared offset %ld (the child left %ld), slot holds %ld\n", i, (long)at,
             slot(i) + 8, m[slot(i) / 8]);
      kill(child, SIGKILL);
      return 3;
    }
    printf("parent %ld\n", i); /* before the answer: the lines come in one order */
    m[1] = 2 * i;
  }
  return reap(child);
}
