/* Linked with -static: it cannot load the checkpoint library, so under `revive launch` it is outside the
 * computation (docs/process-trees.md). `static_sleep SECONDS`: prints a line, creates ./static.running
 * (the driver's cue that it runs now), sleeps, removes the file, prints a line, exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int secs = argc > 1 ? atoi(argv[1]) : 3;
  printf("static: start, %d s\n", secs);
  fflush(stdout);
  int fd = open("static.running", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("static.running");
    return 1;
  }
  close(fd);
  struct timespec t = {secs, 0};
  while (nanosleep(&t, &t) != 0) {
  }
  unlink("static.running");
  printf("static: done\n");
  return 0;
}
