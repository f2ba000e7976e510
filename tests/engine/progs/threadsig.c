/* Signals queued to one thread and not yet taken when a checkpoint comes must come back with it:
 * main queues SIGRTMIN with the values 0..N-1 to thread T (pthread_sigqueue, 4 ms apart); T takes what is
 * pending only every 150 ms, so at almost any moment some values wait in T's own queue. T counts every
 * value it takes; at the end it prints which were missing or taken twice: a restart that lost T's queue
 * prints "missing". (Not checked: the order. When T itself handled the checkpoint, its pending signals are
 * queued to the process again, and a value queued to T later can overtake them: docs/status.md.) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int n_values;

static void nap(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static unsigned char* seen;

static void* taker(void* arg) {
  (void)arg;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN);
  int taken = 0, idle = 0;
  while (taken < n_values && idle < 40) { /* 40 x 150 ms without a value: the rest is lost */
    nap(150);
    struct timespec zero = {0, 0};
    siginfo_t si;
    int took = 0;
    while (sigtimedwait(&s, &si, &zero) == SIGRTMIN) {
      took = 1;
      taken++;
      int v = si.si_value.sival_int;
      if (v >= 0 && v < n_values && seen[v] < 255) seen[v]++;
    }
    idle = took ? 0 : idle + 1;
  }
  int missing = 0, twice = 0;
  for (int v = 0; v < n_values; v++) {
    if (seen[v] == 0 && missing++ < 5) printf("missing: value %d\n", v);
    if (seen[v] > 1 && twice++ < 5) printf("taken %d times: value %d\n", seen[v], v);
  }
  printf("thread took %d signals: %d values missing, %d taken more than once\n", taken, missing, twice);
  return NULL;
}

int main(int argc, char** argv) {
  n_values = argc > 1 ? atoi(argv[1]) : 500;
  seen = calloc((size_t)n_values, 1);
  setvbuf(stdout, NULL, _IOLBF, 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN);
  pthread_sigmask(SIG_BLOCK, &s, NULL); /* blocked in both threads: T takes them with sigtimedwait */
  pthread_t t;
  pthread_create(&t, NULL, taker, NULL);
  for (int k = 0; k < n_values; k++) {
    union sigval v = {.sival_int = k};
    if (pthread_sigqueue(t, SIGRTMIN, v) != 0) printf("pthread_sigqueue %d failed\n", k);
    nap(4);
  }
  pthread_join(t, NULL);
  return 0;
}
