/* Appends a line to log.txt (opened O_APPEND via fopen "a") every few milliseconds and another to
 * data.bin through a plain fd at an explicit offset: the fd plugin must restore both at the checkpoint
 * offsets (cutting what the killed run wrote after the checkpoint). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long steps = argc > 1 ? atol(argv[1]) : 300;
  FILE* log = fopen("log.txt", "a");
  int fd = open("data.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!log || fd < 0) return 90;
  for (long i = 0; i < steps; ++i) {
    fprintf(log, "line %ld value %ld\n", i, i * i % 1000);
    fflush(log);
    char rec[32];
    memset(rec, 'a' + (int)(i % 26), sizeof rec);
    if (write(fd, rec, sizeof rec) != (ssize_t)sizeof rec) return 91;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fclose(log);
  close(fd);
  printf("wrote %ld lines\n", steps);
  return 0;
}
