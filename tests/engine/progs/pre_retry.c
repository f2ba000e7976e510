// A file made while a checkpoint is being taken again (refused for now) and deleted after it must exist
// after a restart from that checkpoint: the pre-image plugin's "moment of G" is when the checkpoint was
// actually taken, not when the generation's directory was made (files_pre.cpp pre_saving). The program
// keeps an inotify event unread for 0.4 s (every attempt in that time is refused for now), makes x,
// reads the event (the next attempt succeeds), waits for the manifest, deletes x, says so and ends; a
// restart from that checkpoint does the same, and fails if x is not there.
//   pre_retry MANIFEST
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int in = inotify_init1(IN_CLOEXEC);
  if (in < 0 || inotify_add_watch(in, ".", IN_CREATE) < 0) return perror("inotify"), 2;
  int a = open("a", O_WRONLY | O_CREAT | O_TRUNC, 0644);  // its IN_CREATE stays unread for a while
  close(a);
  printf("ready\n");
  fflush(stdout);
  nap(400);
  FILE* x = fopen("x", "w");
  if (!x || fputs("made while the checkpoint was taken again\n", x) < 0 || fclose(x) != 0) return perror("x"), 2;
  char buf[4096];
  if (read(in, buf, sizeof buf) <= 0) return perror("read"), 2;
  struct stat st;
  while (stat(argv[1], &st) != 0) nap(5);
  if (unlink("x") != 0) return perror("unlink x after the checkpoint"), 1;
  printf("deleted x\n");
  return 0;
}
