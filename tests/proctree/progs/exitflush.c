/* A child that is still inside exit() when the checkpoint comes: it has written more to a pipe than the
 * pipe holds, through a fully buffered stream, so exit() blocks flushing it until the parent reads. The
 * engine has already said BYE (its last atexit handler), but the child is alive and its parent has not
 * waited for it: the checkpoint must keep it, or the restored parent's waitpid fails with ECHILD
 * (files.make caught gcc in exactly this state once). The parent naps first, then reads everything and
 * waits; it prints what it read and the child's status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tree_util.h"

int main(int argc, char** argv) {
  const long nap_ms = argc > 1 ? atol(argv[1]) : 2500;
  const size_t bytes = 256 * 1024;  /* four times a pipe's capacity */
  int p[2];
  if (pipe(p) != 0) return 90;
  pid_t c = fork();
  if (c < 0) return 91;
  if (c == 0) {
    close(p[0]);
    FILE* f = fdopen(p[1], "w");
    static char buf[1 << 20];
    if (!f || setvbuf(f, buf, _IOFBF, sizeof buf) != 0) _exit(92);
    for (size_t i = 0; i < bytes; ++i) fputc('a' + (int)(i * 7 % 26), f);
    exit(0);  /* blocks in the flush: nobody reads yet */
  }
  close(p[1]);
  nap(nap_ms);
  char chunk[4096];
  size_t got = 0;
  unsigned long sum = 0;
  for (;;) {
    ssize_t n = read(p[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) sum = sum * 31 + (unsigned char)chunk[i];
    got += (size_t)n;
  }
  int st = 0;
  pid_t w;
  while ((w = waitpid(c, &st, 0)) < 0 && errno == EINTR) {
  }
  if (w != c) {
    printf("waitpid(%d): %s\n", (int)c, strerror(errno));
    return 1;
  }
  printf("read %zu bytes, sum %lx, child exit status %d\n", got, sum, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 0;
}
