/* bench/run's job: fills MB megabytes of heap with random bytes (what a checkpoint must save), then every
 * 10 ms appends the wall-clock time (CLOCK_REALTIME, ns) to FILE. A restored process appends again from the
 * checkpoint's file contents on, so the first line after a moment T tells when the job was working again. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ticker MB FILE\n");
    return 2;
  }
  size_t n = (size_t)atol(argv[1]) << 17;
  uint64_t* a = malloc(n * 8);
  if (!a) return 90;
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    a[i] = s;
  }
  int fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return 91;
  for (uint64_t k = 0;; ++k) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char line[64];
    int len = snprintf(line, sizeof line, "%lld %llu\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
                       (unsigned long long)(a[k % n] & 0xff));
    if (write(fd, line, (size_t)len) != len) return 92;
    a[k % n] += 1;  /* the job changes its memory as it goes */
    usleep(10000);
  }
}
