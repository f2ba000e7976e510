/* A deterministic job for `revive run` tests: STEPS steps of a hash chain, one line per step on stdout,
 * SLEEP_MS milliseconds of sleep per step (so a kill lands at any moment of a run of a few seconds), exit 0.
 * Its output depends on every earlier step, so a resumed run that lost or repeated state prints other
 * lines than an uninterrupted one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  long steps = argc > 1 ? atol(argv[1]) : 100;
  long sleep_ms = argc > 2 ? atol(argv[2]) : 20;
  uint64_t h = 1469598103934665603ull;
  for (long i = 0; i < steps; ++i) {
    for (int k = 0; k < 20000; ++k) h = (h ^ (uint64_t)(k + i)) * 1099511628211ull;
    printf("step %ld %016llx\n", i, (unsigned long long)h);
    fflush(stdout);
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return 0;
}
