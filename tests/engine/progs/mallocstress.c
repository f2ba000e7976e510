/* 6 threads hammering malloc/free/realloc and stdio into memory buffers: a checkpoint very likely lands
 * while some thread holds a malloc arena or stdio lock, which the engine must never need. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kThreads = 6 };
static long iters;

static void* worker(void* arg) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)((long)arg + 1), h = 0;
  void* keep[64] = {0};
  char line[128];
  for (long i = 0; i < iters; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    int slot = (int)(s % 64);
    size_t n = 16 + (size_t)(s >> 20) % 60000;
    free(keep[slot]);
    keep[slot] = malloc(n);
    memset(keep[slot], (int)(s & 0xff), n);
    if (i % 16 == 0) {
      keep[slot] = realloc(keep[slot], n * 2);
      memset((char*)keep[slot] + n, 1, n);
    }
    int len = snprintf(line, sizeof line, "%ld:%llx", i, (unsigned long long)s);
    for (int k = 0; k < len; ++k) h = (h ^ (uint8_t)line[k]) * 1099511628211ull;
    h ^= ((unsigned char*)keep[slot])[n / 2];
  }
  for (int k = 0; k < 64; ++k) free(keep[k]);
  return (void*)(uintptr_t)h;
}

int main(int argc, char** argv) {
  iters = argc > 1 ? atol(argv[1]) : 200000;
  pthread_t t[kThreads];
  for (long i = 0; i < kThreads; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  uint64_t h = 0;
  for (int i = 0; i < kThreads; ++i) {
    void* r;
    pthread_join(t[i], &r);
    h = h * 31 + (uintptr_t)r;
  }
  printf("iters=%ld h=%016llx\n", iters, (unsigned long long)h);
  return 0;
}
