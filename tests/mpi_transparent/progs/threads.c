/* threads ITERS SLEEP_US NTHREADS: MPI_THREAD_MULTIPLE under checkpoint/restart (issue 7). Each rank
 * runs NTHREADS threads that communicate at the same time: thread t on its own Comm_dup of the world
 * (a ring with Isend/Irecv, a Sendrecv the other way, an Allreduce), and all threads on one shared
 * communicator, told apart by tag (= thread id), to the same thread of the next rank. Per iteration the
 * threads meet at a barrier, thread 0 gathers the per-thread digests to rank 0, which prints the line.
 * A checkpoint therefore finds several threads inside MPI calls at once. */
#include "common.h"
#include <pthread.h>

static long iters, sleep_us;
static int nthreads, rank, size;
static MPI_Comm *own, shared;
static uint64_t *hs; /* per thread, this iteration */
static pthread_barrier_t bar;

static void *thread_main(void *arg) {
  int t = (int)(long)arg;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  enum { N = 2000 };
  uint64_t *out = malloc(8 * N), *in = malloc(8 * N), total = FNV0;
  for (long it = 0; it < iters; it++) {
    uint64_t h = fnv64(fnv64(FNV0, it), (uint64_t)t);
    for (int k = 0; k < N; k++) out[k] = val3(rank * 16 + t, it, k);
    MPI_Request r[2];
    MPI_Irecv(in, N, MPI_UINT64_T, left, 1, own[t], &r[0]);
    MPI_Isend(out, N, MPI_UINT64_T, right, 1, own[t], &r[1]);
    usleep((useconds_t)(sleep_us / 4 * (1 + (t + it) % 3))); /* threads at different points */
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    CHECK(in[N - 1] == val3(left * 16 + t, it, N - 1), "thread ring content");
    h = fnv(h, in, 8 * N);
    uint64_t v = val3(rank, it, 100 + t), w;
    MPI_Sendrecv(&v, 1, MPI_UINT64_T, left, 2, &w, 1, MPI_UINT64_T, right, 2, own[t], MPI_STATUS_IGNORE);
    CHECK(w == val3(right, it, 100 + t), "thread Sendrecv");
    h = fnv64(h, w);
    uint64_t s[2] = {v, 1}, rs[2];
    MPI_Allreduce(s, rs, 2, MPI_UINT64_T, MPI_SUM, own[t]);
    CHECK(rs[1] == (uint64_t)size, "thread Allreduce");
    h = fnv(h, rs, sizeof rs);
    /* The shared communicator: tag t keeps the threads' messages apart. */
    uint64_t x[64], y[64];
    for (int k = 0; k < 64; k++) x[k] = val3(rank, it, 200 + 64 * t + k);
    MPI_Sendrecv(x, 64, MPI_UINT64_T, right, t, y, 64, MPI_UINT64_T, left, t, shared, MPI_STATUS_IGNORE);
    CHECK(y[5] == val3(left, it, 200 + 64 * t + 5), "shared communicator, tag per thread");
    h = fnv(h, y, sizeof y);
    hs[t] = h;
    pthread_barrier_wait(&bar);
    if (t == 0) {
      uint64_t c = fnv64(FNV0, it);
      for (int k = 0; k < nthreads; k++) c = fnv64(c, hs[k]);
      total = fnv64(total, report(MPI_COMM_WORLD, "threads", it, c));
    }
    pthread_barrier_wait(&bar);
  }
  if (t == 0) report_end(MPI_COMM_WORLD, "threads", iters, total);
  free(out);
  free(in);
  return NULL;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided");
  iters = arg_long(argc, argv, 1, 40);
  sleep_us = arg_long(argc, argv, 2, 100000);
  nthreads = (int)arg_long(argc, argv, 3, 3);
  CHECK(nthreads >= 1 && nthreads <= 16, "1..16 threads");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  own = malloc(sizeof(MPI_Comm) * nthreads);
  hs = calloc(nthreads, sizeof(uint64_t));
  for (int t = 0; t < nthreads; t++) MPI_Comm_dup(MPI_COMM_WORLD, &own[t]);
  MPI_Comm_dup(MPI_COMM_WORLD, &shared);
  pthread_barrier_init(&bar, NULL, nthreads);
  pthread_t *th = malloc(sizeof(pthread_t) * nthreads);
  for (int t = 1; t < nthreads; t++) pthread_create(&th[t], NULL, thread_main, (void *)(long)t);
  thread_main((void *)0L);
  for (int t = 1; t < nthreads; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < nthreads; t++) MPI_Comm_free(&own[t]);
  MPI_Comm_free(&shared);
  finish();
  return 0;
}
