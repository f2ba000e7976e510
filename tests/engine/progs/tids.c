/* Thread ids the program stored keep naming the same threads across a restart: 4 workers store gettid()
 * when they start and check it again on every step; the main thread keeps the stored ids and, on every
 * step, sends each worker a signal with tgkill(stored tid) (and waits until that worker counted it),
 * looks up /proc/self/task/<stored tid> and asks sched_getaffinity(stored tid). With new tids after a
 * restart, every one of these fails; the program then exits 7 (the output differs too).
 * The main thread's own id is the pid: a standalone restart gives it a new one, so it is not checked. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kThreads = 4 };
static long steps;
static volatile pid_t stored[kThreads];
static volatile long hits[kThreads];  /* SIGUSR1 counted by the thread it was sent to */
static volatile long stray;           /* ... or by some other thread */
static volatile long tid_errors[kThreads];
static volatile int started, done;
static __thread int my_slot = -1;

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static void on_usr1(int sig) {
  (void)sig;
  if (my_slot >= 0) __atomic_add_fetch(&hits[my_slot], 1, __ATOMIC_RELEASE);
  else __atomic_add_fetch(&stray, 1, __ATOMIC_RELAXED);
}

static void nap(long ns) {
  struct timespec ts = {0, ns};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void* worker(void* arg) {
  my_slot = (int)(intptr_t)arg;
  const pid_t mine = tid();
  stored[my_slot] = mine;
  __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
  volatile uint64_t h = 1469598103934665603ull + (uint64_t)my_slot;
  while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    for (int k = 0; k < 20000; ++k) h = (h ^ (uint64_t)k) * 1099511628211ull;
    if (tid() != mine) ++tid_errors[my_slot];
    nap(1000 * 1000);
  }
  return NULL;
}

int main(int argc, char** argv) {
  steps = argc > 1 ? atol(argv[1]) : 500;
  struct sigaction sa = {0};
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  pthread_t t[kThreads];
  for (long i = 0; i < kThreads; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < kThreads) nap(1000 * 1000);
  pid_t saved[kThreads];
  for (int i = 0; i < kThreads; ++i) saved[i] = stored[i];
  long kill_errors = 0, task_errors = 0, affinity_errors = 0, lost = 0;
  for (long s = 0; s < steps; ++s) {
    for (int i = 0; i < kThreads; ++i) {
      const long before = __atomic_load_n(&hits[i], __ATOMIC_ACQUIRE);
      if (syscall(SYS_tgkill, getpid(), saved[i], SIGUSR1) != 0) {
        ++kill_errors;
      } else {
        /* Delivered to that thread: wait for its handler (generously, the machine may be loaded). */
        int waited = 0;
        while (__atomic_load_n(&hits[i], __ATOMIC_ACQUIRE) == before && waited++ < 20000) nap(500 * 1000);
        if (__atomic_load_n(&hits[i], __ATOMIC_ACQUIRE) == before) ++lost;
      }
      char path[64];
      struct stat st;
      snprintf(path, sizeof path, "/proc/self/task/%d", (int)saved[i]);
      if (stat(path, &st) != 0) ++task_errors;
      cpu_set_t cpus;
      if (sched_getaffinity(saved[i], sizeof cpus, &cpus) != 0) ++affinity_errors;
    }
    nap(3 * 1000 * 1000);
  }
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  long tid_err = 0;
  for (int i = 0; i < kThreads; ++i) {
    if (pthread_join(t[i], NULL) != 0) return 99;
    tid_err += tid_errors[i];
    printf("thread %d: signals %ld\n", i, hits[i]);
  }
  printf("steps=%ld gettid_changed=%ld tgkill_failed=%ld task_missing=%ld affinity_failed=%ld lost=%ld stray=%ld\n",
         steps, tid_err, kill_errors, task_errors, affinity_errors, lost, stray);
  return tid_err || kill_errors || task_errors || affinity_errors || lost || stray ? 7 : 0;
}
