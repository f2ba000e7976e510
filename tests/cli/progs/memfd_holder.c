/* Maps an 8 MiB memfd shared, hands it (as descriptor 3) to PROG, which it starts (a static program: it
 * stays outside the computation and keeps writing into the memory), then prints N numbered lines 50 ms
 * apart. For outside_writer_test.sh. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int lines = atoi(argv[2]);
  const size_t n = 8u << 20;
  int fd = memfd_create("shared", 0);
  if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return 3;
  if (mmap(0, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED) return 4;
  if (fd != 3 && (dup2(fd, 3) != 3 || close(fd) != 0)) return 5;
  if (fork() == 0) {
    execl(argv[1], argv[1], (char*)0);
    _exit(127);
  }
  for (int i = 0; i < lines; ++i) {
    printf("line %d\n", i);
    fflush(stdout);
    usleep(50000);
  }
  return 0;
}
