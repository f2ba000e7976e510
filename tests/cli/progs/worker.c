/* A deterministic multi-threaded job for end-to-end `revive` tests: NTHREADS workers each run a hash
 * chain, the main thread joins them round by round and prints one line per round, with short sleeps so
 * checkpoints land both in computation and in system calls. Exit code depends on the final value. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kMaxThreads = 8 };
static uint64_t g_state[kMaxThreads];

static void* work(void* arg) {
  long t = (long)arg;
  uint64_t h = g_state[t];
  for (int k = 0; k < 150000; ++k) h = (h ^ (uint64_t)(k + t)) * 1099511628211ull;
  g_state[t] = h;
  return NULL;
}

int main(int argc, char** argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 100;
  long nthreads = argc > 2 ? atol(argv[2]) : 2;
  if (nthreads < 1 || nthreads > kMaxThreads) return 99;
  for (long t = 0; t < nthreads; ++t) g_state[t] = 1469598103934665603ull + (uint64_t)t;
  uint64_t total = 0;
  for (long r = 0; r < rounds; ++r) {
    pthread_t th[kMaxThreads];
    for (long t = 0; t < nthreads; ++t) pthread_create(&th[t], NULL, work, (void*)t);
    for (long t = 0; t < nthreads; ++t) pthread_join(th[t], NULL);
    for (long t = 0; t < nthreads; ++t) total ^= g_state[t] + (uint64_t)r;
    struct timespec ts = {0, 8 * 1000 * 1000};
    nanosleep(&ts, NULL);
    printf("round %ld total=%016llx\n", r, (unsigned long long)total);
    fflush(stdout);
  }
  printf("done total=%016llx\n", (unsigned long long)total);
  return (int)(total % 5) + 10;
}
