/* The main thread calls pthread_exit while two workers go on (the thread-group leader is a zombie at
 * checkpoint time); the last worker prints and exits the process. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long steps;
static uint64_t sums[2];
static pthread_t workers[2];

static void* work(void* arg) {
  long id = (long)arg;
  uint64_t h = 1469598103934665603ull + (uint64_t)id;
  for (long i = 0; i < steps; ++i) {
    for (int k = 0; k < 50000; ++k) h = (h ^ (uint64_t)(i + k)) * 1099511628211ull;
    struct timespec ts = {0, 4 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  sums[id] = h;
  if (id == 1) {
    pthread_join(workers[0], NULL);
    printf("steps=%ld h0=%016llx h1=%016llx\n", steps, (unsigned long long)sums[0], (unsigned long long)sums[1]);
    exit(3);
  }
  return NULL;
}

int main(int argc, char** argv) {
  steps = argc > 1 ? atol(argv[1]) : 500;
  for (long i = 0; i < 2; ++i) pthread_create(&workers[i], NULL, work, (void*)i);
  pthread_exit(NULL);
}
