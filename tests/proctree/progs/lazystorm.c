/* Fork storm for the lazy join (docs/process-trees.md): fork+wait in a loop, child i lives
 * (i * 37) % 101 ms (0 to 100: some end long before their join timer, some join on it, some are poked by
 * a checkpoint), writes one line to shared.txt (inherited, O_APPEND) and exits with i % 100; the parent
 * writes each status to shared.txt and stdout. Checkpoints every ~100 ms land at every point of a child's
 * life; one that missed a child would fail the restored parent's waitpid or lose the child's line. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tree_util.h"

static void line(int fd, const char* s) {
  if (write(fd, s, strlen(s)) != (ssize_t)strlen(s)) _exit(98);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 60;
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fd = open("shared.txt", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (fd < 0) return 97;
  char buf[96];
  for (int i = 0; i < n; i++) {
    pid_t c = fork();
    if (c < 0) return 99;
    if (c == 0) {
      int ms = (i * 37) % 101;
      if (ms) nap(ms);
      snprintf(buf, sizeof buf, "child %d lived %d ms\n", i, ms);
      line(fd, buf);
      _exit(i % 100);
    }
    int st = 0;
    if (waitpid(c, &st, 0) != c) snprintf(buf, sizeof buf, "child %d: waitpid failed\n", i);
    else snprintf(buf, sizeof buf, "child %d exited %d\n", i, WEXITSTATUS(st));
    line(fd, buf);
    fputs(buf, stdout);
  }
  return 0;
}
