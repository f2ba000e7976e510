/* Single-threaded counter: a deterministic hash chain over ~2 s of work, with short sleeps so that a
 * checkpoint can land in a system call too. Prints progress lines to stdout and the final value. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  long steps = argc > 1 ? atol(argv[1]) : 200;
  uint64_t h = 1469598103934665603ull;
  for (long i = 0; i < steps; ++i) {
    for (int k = 0; k < 200000; ++k) h = (h ^ (uint64_t)(i * 31 + k)) * 1099511628211ull;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (i % 20 == 0) printf("step %ld h=%016llx\n", i, (unsigned long long)h);
  }
  printf("done h=%016llx\n", (unsigned long long)h);
  return (int)(h % 7);
}
