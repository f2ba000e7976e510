/* A large heap (default 1024 MiB, argv[1]) filled with non-zero pseudo-random data, then mutated for a
 * while: the image must carry every page, and malloc/sbrk must keep working after restart. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int main(int argc, char** argv) {
  size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 1024;
  long steps = argc > 2 ? atol(argv[2]) : 150;
  size_t n = mb << 17;  /* uint64 words */
  uint64_t* a = malloc(n * sizeof *a);
  if (!a) return 90;
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) a[i] = next(&s) | 1;
  uint64_t h = 0;
  for (long step = 0; step < steps; ++step) {
    for (int k = 0; k < 20000; ++k) {
      size_t i = next(&s) % n;
      a[i] = a[i] * 6364136223846793005ull + (uint64_t)step;
    }
    /* Small allocations through brk (below the mmap threshold) before and after a restart. */
    char* small = malloc(1000 + (size_t)step);
    memset(small, (int)step, 1000 + (size_t)step);
    h += (uint64_t)small[step];
    if (step % 10 == 0) {
      void* grow = sbrk(0);
      h += grow != (void*)-1;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; i < n; ++i) h = (h ^ a[i]) * 1099511628211ull;
  /* Growth after restart: many small blocks from the main arena. */
  size_t total = 0;
  for (int i = 0; i < 20000; ++i) {
    char* p = malloc(4000);
    if (!p) return 91;
    p[0] = (char)i;
    total += 4000;
  }
  printf("mb=%zu steps=%ld h=%016llx grown=%zu\n", mb, steps, (unsigned long long)h, total);
  return 0;
}
