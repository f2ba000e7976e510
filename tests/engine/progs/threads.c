/* 4 pthreads taking turns under one mutex and a condition variable: a deterministic hash chain across
 * threads, with sleeps so a checkpoint lands in futex waits and nanosleep. Main checks pthread_kill(t,0)
 * (glibc's cached tids) and joins (CLONE_CHILD_CLEARTID) before printing. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kThreads = 4 };
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long rounds, turn;
static uint64_t h = 1469598103934665603ull;
static __thread uint64_t tls_sum;  /* per-thread TLS must survive too */

static void* worker(void* arg) {
  long id = (long)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (turn < rounds && turn % kThreads != id) pthread_cond_wait(&cv, &mu);
    if (turn >= rounds) {
      pthread_mutex_unlock(&mu);
      break;
    }
    for (int k = 0; k < 20000; ++k) h = (h ^ (uint64_t)(turn * 7 + id + k)) * 1099511628211ull;
    tls_sum += h & 0xff;
    ++turn;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (turn % 8 == 0) {
      struct timespec ts = {0, 2 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return (void*)(uintptr_t)tls_sum;
}

int main(int argc, char** argv) {
  rounds = argc > 1 ? atol(argv[1]) : 4000;
  pthread_t t[kThreads];
  for (long i = 0; i < kThreads; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  uint64_t total = 0;
  int kill_errors = 0;
  for (int spin = 0; spin < 40; ++spin) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&mu);
    int running = turn < rounds;
    pthread_mutex_unlock(&mu);
    if (!running) break;
    for (int i = 0; i < kThreads; ++i) kill_errors += pthread_kill(t[i], 0) != 0;
  }
  for (int i = 0; i < kThreads; ++i) {
    void* r;
    if (pthread_join(t[i], &r) != 0) return 99;
    total += (uintptr_t)r;
  }
  printf("rounds=%ld h=%016llx tls_total=%llu kill_errors=%d\n", rounds, (unsigned long long)h,
         (unsigned long long)total, kill_errors);
  return kill_errors ? 98 : 0;
}
