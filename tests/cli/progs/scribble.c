/* Statically linked, so outside the computation (the checkpoint library cannot load): maps descriptor 3 (a
 * memfd its parent shares) and overwrites all of it with pseudo-random words, for ever. For
 * outside_writer_test.sh: memory that changes while an image is written. */
#include <stdint.h>
#include <sys/mman.h>

int main(void) {
  const unsigned long n = 8ul << 20;
  volatile uint64_t* p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0);
  if (p == MAP_FAILED) return 1;
  uint64_t x = 88172645463325252ull;
  for (;;)
    for (unsigned long i = 0; i < n / 8; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      p[i] = x;
    }
}
