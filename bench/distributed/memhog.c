/* Benchmark process: holds MB megabytes of incompressible data (xorshift) and sleeps in short steps until
 * SECONDS have passed, then prints a checksum of the data (so a restored copy can be checked). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  long mb = argc > 1 ? atol(argv[1]) : 64;
  double secs = argc > 2 ? atof(argv[2]) : 60;
  size_t n = (size_t)mb << 17; /* 8-byte words */
  uint64_t* d = malloc(n * sizeof *d);
  if (!d) return 99;
  uint64_t x = 88172645463325252ull ^ (uint64_t)mb;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    d[i] = x;
  }
  printf("ready\n");
  fflush(stdout);
  for (long steps = (long)(secs * 100); steps > 0; steps--) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += d[i] * (i | 1);
  printf("sum %016llx\n", (unsigned long long)sum);
  return 0;
}
