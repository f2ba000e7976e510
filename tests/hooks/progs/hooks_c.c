/* hooks_c STEPS [LONG_STEP LONG_MS]: the C API of <revive/hooks.h> under test (tests/hooks/hooks_driver.py).
 * Each step updates two counters inside a critical section and prints them (stdout: must equal an
 * uninterrupted run's, with or without revive). At step LONG_STEP one section lasts LONG_MS ms. Events go
 * to the file $HOOKS_EVENTS, one line each, opened and closed per line (outside the checkpointed working
 * directory, so a restart neither restores nor truncates it): "active=0|1", "long begin", "long end",
 * "after N" (the N-th step after the long section), and one line per callback with its counts.
 * HOOKS_CKPT_SLEEP_MS=T: the first checkpoint callback sleeps T ms first. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <revive/hooks.h>

#include "events.h"

static volatile int n_ckpt, n_cont, n_restart;

static void event(const char* fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  events_append(line, (size_t)n);
}

static void sleep_ms(long ms);

static void on_checkpoint(void* arg) {
  static int slept;
  const char* slow = getenv("HOOKS_CKPT_SLEEP_MS"); /* the first checkpoint callback takes this long */
  if (slow && !slept++) sleep_ms(atol(slow));
  n_ckpt++;
  event("checkpoint n=%d tag=%s", n_ckpt, (const char*)arg);
}
static void on_continue(void* arg) {
  n_cont++;
  event("continue n=%d tag=%s", n_cont, (const char*)arg);
}
static void on_restart(void* arg) {
  n_restart++;
  event("restart n=%d checkpoints=%d continues=%d tag=%s", n_restart, n_ckpt, n_cont, (const char*)arg);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char** argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 100;
  int long_step = argc > 3 ? atoi(argv[2]) : -1;
  long long_ms = argc > 3 ? atol(argv[3]) : 0;
  event("active=%d", revive_hooks_active());
  static char tag[] = "c";
  if (revive_register_callback(REVIVE_HOOK_CHECKPOINT, on_checkpoint, tag) <= 0 ||
      revive_register_callback(REVIVE_HOOK_CONTINUE, on_continue, tag) <= 0 ||
      revive_register_callback(REVIVE_HOOK_RESTART, on_restart, tag) <= 0) {
    fprintf(stderr, "registration failed\n");
    return 3;
  }
  if (revive_register_callback(7, on_checkpoint, tag) >= 0 || revive_critical_end() >= 0) return 4;
  volatile unsigned long a = 0, b = 0;
  int after = 0;
  for (int i = 0; i < steps; ++i) {
    revive_critical_begin();
    revive_critical_begin(); /* nested: only the outermost counts */
    a += (unsigned long)i;
    if (i == long_step) {
      event("long begin");
      sleep_ms(long_ms);
      event("long end");
    }
    b += (unsigned long)i;
    revive_critical_end();
    if (revive_critical_end() != 0 || revive_critical_depth() != 0) return 5;
    if (a != b) return 6;
    if (long_step >= 0 && i > long_step && after < 5) event("after %d", ++after);
    printf("step %d a=%lu b=%lu\n", i, a, b);
    fflush(stdout);
    sleep_ms(20);
  }
  printf("done\n");
  return 0;
}
