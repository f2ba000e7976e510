/* A classic work queue: `work_queue RECORDS PACE_US`. The parent writes RECORDS records of 512 bytes (a
 * sequence number and checked filler; each write is atomic, PIPE_BUF) into one pipe read by two forked
 * workers at once; each worker checks every record it takes, reports its number to the parent over a
 * second pipe and sleeps PACE_US. The parent checks that every record was delivered exactly once across
 * the two workers (a drained-twice pipe duplicates or loses records) and prints the totals, which do not
 * depend on how the records were split between the workers. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "stream_util.h"

#define REC 512
static uint64_t records;
static int work_w;

static void fill(uint8_t* r, uint64_t n) {
  memcpy(r, &n, 8);
  for (int i = 8; i < REC; ++i) r[i] = seq_byte(n, (uint64_t)i);
}

static void* producer(void* arg) {
  (void)arg;
  uint8_t r[REC];
  for (uint64_t n = 0; n < records; ++n) {
    fill(r, n);
    write_all(work_w, r, REC);
  }
  close(work_w);
  return NULL;
}

static void worker(int in, int out, unsigned pace) {
  uint8_t r[REC], want[REC];
  for (;;) {
    size_t got = 0;
    while (got < REC) {
      int n = read_some(in, r + got, REC - got);
      if (n == 0) break;
      got += (size_t)n;
    }
    if (got == 0) _exit(0);
    uint64_t n;
    memcpy(&n, r, 8);
    fill(want, n);
    if (got != REC || n >= records || memcmp(r, want, REC) != 0) {
      fprintf(stderr, "worker %d: bad record (%zu bytes, number %llu)\n", (int)getpid(), got, (unsigned long long)n);
      _exit(1);
    }
    write_all(out, (const uint8_t*)&n, 8);
    if (pace) usleep(pace);
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: work_queue RECORDS PACE_US\n");
    return 2;
  }
  records = strtoull(argv[1], NULL, 10);
  unsigned pace = (unsigned)atoi(argv[2]);
  int work[2], res[2];
  if (pipe(work) != 0 || pipe(res) != 0) die("pipe");
  pid_t kids[2];
  for (int i = 0; i < 2; ++i) {
    kids[i] = fork();
    if (kids[i] < 0) die("fork");
    if (kids[i] == 0) {
      close(work[1]);
      close(res[0]);
      worker(work[0], res[1], pace);
    }
  }
  close(work[0]);
  close(res[1]);
  work_w = work[1];
  pthread_t t;
  pthread_create(&t, NULL, producer, NULL);
  uint8_t* seen = calloc(records, 1);
  uint64_t n, count = 0;
  for (;;) {
    size_t got = 0;
    while (got < 8) {
      int r = read_some(res[0], (uint8_t*)&n + got, 8 - got);
      if (r == 0) break;
      got += (size_t)r;
    }
    if (got == 0) break;
    if (got != 8 || n >= records || seen[n]) {
      fprintf(stderr, "parent: record %llu reported twice or malformed report\n", (unsigned long long)n);
      return 1;
    }
    seen[n] = 1;
    ++count;
  }
  pthread_join(t, NULL);
  for (int i = 0; i < 2; ++i) {
    int st = 0;
    if (waitpid(kids[i], &st, 0) != kids[i]) die("waitpid");
    printf("worker %d exit %d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  printf("%llu of %llu records delivered, each exactly once\n", (unsigned long long)count,
         (unsigned long long)records);
  return count == records ? 0 : 1;
}
