/* stall_prog MB SECONDS: fills MB of heap, then reads it in 1 MiB pieces in a loop for SECONDS and prints
 * the longest gap between the ends of two consecutive pieces (ms): the longest stall the program itself
 * saw, whatever a checkpoint engine reports about itself. Prints "ready" on stderr once filled. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  size_t n = (size_t)atol(argv[1]) << 20 >> 3;
  double secs = atof(argv[2]);
  uint64_t* a = malloc(n * 8);
  if (!a) return 1;
  for (size_t i = 0; i < n; i++) a[i] = i * 0x9E3779B97F4A7C15ull;
  fprintf(stderr, "ready\n");
  const size_t piece = (1u << 20) / 8;
  double start = now(), last = start, worst = 0;
  uint64_t sum = 0;
  for (size_t i = 0; now() - start < secs; i = (i + piece) % n) {
    for (size_t j = i; j < i + piece && j < n; j++) sum += a[j];
    double t = now();
    if (t - last > worst) worst = t - last;
    last = t;
  }
  printf("max_gap_ms %.3f sum %llu\n", worst * 1e3, (unsigned long long)sum);
  return 0;
}
