/* tick_prog MB STOPFILE: fills MB of heap with pseudo-random data (incompressible: no engine gains by
 * compressing it), prints "ready PID" on stderr, then every millisecond prints "tick N WALL_US SAMPLE" on
 * stdout (flushed; WALL_US = CLOCK_REALTIME in microseconds) until STOPFILE exists. A benchmark that
 * starts a restart at wall time T0 reads the first tick whose WALL_US > T0 after the run: the moment the
 * restored program was doing its own work again, whatever checkpointer restored it (revive or DMTCP).
 * When STOPFILE exists it regenerates the sequence, compares every word of the heap with it (so every
 * page is read: a lazily restored heap is paged in here) and prints "end WALL_US MISMATCHES VERIFY_US"
 * before exiting: the restored program's end, and whether its 1 GiB came back intact.
 * Nothing in it knows about either checkpointer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  size_t n = (size_t)atol(argv[1]) << 20 >> 3;
  uint64_t* a = malloc(n * 8);
  if (!a) return 1;
  const uint64_t seed = 88172645463325252ull;
  uint64_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    a[i] = x;
  }
  fprintf(stderr, "ready %ld\n", (long)getpid());
  for (uint64_t t = 0;; t++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("tick %llu %lld %llu\n", (unsigned long long)t, (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000,
           (unsigned long long)a[(t * 4099) % n]);
    fflush(stdout);
    if (access(argv[2], F_OK) == 0) {
      /* A tick of its own first: a program restored between its last tick and this check (DMTCP's
       * often resumes here) would otherwise end without one after the restart. */
      clock_gettime(CLOCK_REALTIME, &ts);
      printf("tick %llu %lld %llu\n", (unsigned long long)t + 1,
             (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, (unsigned long long)a[((t + 1) * 4099) % n]);
      fflush(stdout);
      unsigned long long bad = 0;
      x = seed;
      for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bad += a[i] != x;
      }
      struct timespec te;
      clock_gettime(CLOCK_REALTIME, &te);
      long long end_us = (long long)te.tv_sec * 1000000 + te.tv_nsec / 1000;
      printf("end %lld %llu %lld\n", end_us, bad, end_us - ((long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000));
      fflush(stdout);
      return bad ? 3 : 0;
    }
    usleep(1000);
  }
}
