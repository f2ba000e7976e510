/* Multi-threaded program with 96 MB of compressible, changing memory, for parallel compression of images
 * (engine.compress_mt*): 4 threads each rewrite part of their own 24 MB buffer per step and sum it; main
 * prints the sums. It also checks what the engine's compression workers must not disturb:
 *  - the number of threads in /proc/self/task stays what it was at the start (the engine's workers exist
 *    only while the program is suspended, and never come back in a restored process);
 *  - glibc's thread bookkeeping still works: a short-lived thread is created and joined every step, and
 *    every 40 steps the process forks a child and reaps it (fork walks glibc's list of thread stacks).
 * Any violation prints a line that the reference run does not have, so the output comparison fails.
 * Usage: zthreads STEPS */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NT 4
#define WORDS (24u << 17) /* 24 MB of uint64_t */

static uint64_t* buf[NT];
static uint64_t sums[NT];
static long steps;
static pthread_barrier_t bar;

static int count_tasks(void) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

static void* worker(void* arg) {
  const int t = (int)(intptr_t)arg;
  uint64_t* b = buf[t];
  for (size_t i = 0; i < WORDS; ++i) b[i] = 0x2020202030313233ull + (i % 61) + ((uint64_t)t << 40);
  for (long s = 0; s < steps; ++s) {
    pthread_barrier_wait(&bar);
    const size_t from = (size_t)(s * 7919 + t * 104729) % (WORDS - 8192);
    for (size_t i = from; i < from + 8192; ++i) b[i] = b[i] * 6364136223846793005ull + (uint64_t)s;
    uint64_t h = 0;
    for (size_t i = 0; i < WORDS; i += 512) h = (h ^ b[i]) * 1099511628211ull;
    sums[t] = h;
    pthread_barrier_wait(&bar);
  }
  return NULL;
}

static void* helper(void* arg) { return (void*)((intptr_t)arg * 3 + 1); }

int main(int argc, char** argv) {
  steps = argc > 1 ? atol(argv[1]) : 100;
  pthread_barrier_init(&bar, NULL, NT + 1);
  pthread_t th[NT];
  for (int t = 0; t < NT; ++t) {
    buf[t] = malloc(WORDS * sizeof(uint64_t));
    if (!buf[t]) return 90;
    pthread_create(&th[t], NULL, worker, (void*)(intptr_t)t);
  }
  const int base = count_tasks();
  for (long s = 0; s < steps; ++s) {
    pthread_barrier_wait(&bar);
    /* Checked while every worker is inside its step (none has exited yet). */
    /* A thread that just exited may linger in /proc for a moment: only a lasting difference counts. */
    int n = count_tasks();
    for (int k = 0; k < 500 && n != base; ++k) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
      n = count_tasks();
    }
    if (n != base) printf("step %ld: %d threads in /proc/self/task, %d at the start\n", s, n, base);
    pthread_barrier_wait(&bar);
    uint64_t all = 0;
    for (int t = 0; t < NT; ++t) all ^= sums[t] + (uint64_t)t;
    printf("step %ld sum %016llx\n", s, (unsigned long long)all);
    pthread_t h;
    void* r = NULL;
    if (pthread_create(&h, NULL, helper, (void*)(intptr_t)s) != 0 || pthread_join(h, &r) != 0 ||
        (intptr_t)r != s * 3 + 1)
      printf("step %ld: helper thread failed\n", s);
    if (s % 40 == 0) {
      fflush(stdout);
      pid_t c = fork();
      if (c == 0) _exit((int)(s % 7));
      int st = 0;
      if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != s % 7)
        printf("step %ld: fork/wait failed\n", s);
    }
    fflush(stdout);
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  for (int t = 0; t < NT; ++t) pthread_join(th[t], NULL);
  printf("done\n");
  return 0;
}
