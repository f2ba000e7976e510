/* rma_app_common.h -- small helpers shared by the RMA test apps (fft_transpose.c, dht.c,
 * stencil.c): 64-bit mixing, option parsing, the per-iteration sleep and digest printing.
 * Plain C99 + POSIX nanosleep; everything is integer arithmetic so the output is bit-for-bit
 * reproducible across runs, MPI implementations and (where the app allows) rank counts. */
#ifndef RMA_APP_COMMON_H
#define RMA_APP_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

/* splitmix64 finaliser: a bijection on uint64 with good avalanche. */
static inline uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static inline uint64_t hash2(uint64_t a, uint64_t b) { return mix64(mix64(a) ^ (b * UINT64_C(0xd6e8feb86659fd93))); }

static inline uint64_t rotl64(uint64_t x, unsigned r) { return (x << (r & 63)) | (x >> ((64 - r) & 63)); }

/* Parse a non-negative decimal option value; returns 0 on garbage (the caller prints usage). */
static inline int parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;
  if (!s || !*s || *s == '-') return 0;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || !end || *end) return 0;
  *out = (uint64_t)v;
  return 1;
}

static inline void sleep_ms(uint64_t ms) {
  if (!ms) return;
  struct timespec ts;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)((ms % 1000) * 1000000L);
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* MPI_Init, then this rank's number and the job's size in MPI_COMM_WORLD. */
static inline void app_init(int *argc, char ***argv, int *me, int *np) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, me);
  MPI_Comm_size(MPI_COMM_WORLD, np);
}

/* Fatal error: message to stderr (never stdout) and abort the whole job. */
static inline void die(const char *app, const char *msg) {
  fprintf(stderr, "%s: %s\n", app, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

/* Bytes to ask MPI_Win_allocate for `elems` uint64 cells, rounded up to a multiple of 64.
 * MPICH 4.0.2 (ch4, shared memory) misplaces the window of some ranks by 8 bytes relative to the
 * returned baseptr when the size is not a multiple of 16: RMA to displacement d of such a rank
 * lands at baseptr[d-1] (seen as corrupted tables on rank 1 of dht). */
static inline MPI_Aint win_bytes(size_t elems) {
  size_t b = elems * sizeof(uint64_t);
  return (MPI_Aint)((b + 63) & ~(size_t)63);
}

/* Reduce (xor, sum) pairs to rank 0: element 0 with MPI_BXOR, element 1 with MPI_SUM. */
static inline void reduce_digest(const uint64_t local[2], uint64_t global[2]) {
  global[0] = global[1] = 0;
  MPI_Reduce((void *)&local[0], &global[0], 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
  MPI_Reduce((void *)&local[1], &global[1], 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
}

/* Running chain over all iteration digests, printed as the final "done digest". */
static inline uint64_t chain_digest(uint64_t chain, const uint64_t d[2]) { return hash2(chain ^ d[0], d[1]); }


/* The end of one iteration: reduce the ranks' (xor, sum) pair, chain it, and print it on rank 0 as
 * "iter K digest <xor64> sum <sum64>". */
static inline void report_iter(int me, uint64_t it, const uint64_t local[2], uint64_t *chain) {
  uint64_t glob[2];
  reduce_digest(local, glob);
  *chain = chain_digest(*chain, glob);
  if (me == 0) {
    printf("iter %" PRIu64 " digest %016" PRIx64 " sum %016" PRIx64 "\n", it, glob[0], glob[1]);
    fflush(stdout);
  }
}

/* --time: the application's own run time (MPI_Init return to MPI_Finalize, slowest rank) on rank 0's
 * stderr as "elapsed_s S", for bench/rma; mpirun's start-up stays out of the figure. */
static double rma_app_t0;
static inline void app_timer_start(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  rma_app_t0 = MPI_Wtime();
}
static inline void app_timer_report(int enabled) {
  if (!enabled) return;
  double mine = MPI_Wtime() - rma_app_t0, slowest = 0;
  int me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (me == 0) fprintf(stderr, "elapsed_s %.6f\n", slowest);
}

#endif
