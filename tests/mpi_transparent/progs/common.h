/* Shared by the MPI test programs of tests/mpi_transparent (issue 7): argument parsing and an
 * order-independent digest. Every program prints one line per iteration from rank 0 (fflush'ed), whose
 * content depends only on the arguments and the number of ranks: integer arithmetic only (floating-point
 * reductions could depend on the MPI's algorithm), messages from ANY_SOURCE combined commutatively. */
#ifndef MPI_TRANSPARENT_COMMON_H
#define MPI_TRANSPARENT_COMMON_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* splitmix64: a well-mixed function of one 64-bit value. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
/* FNV-1a over bytes, chained from h (order-dependent: for data whose order is defined). */
static inline uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ULL;
  return h;
}
static inline uint64_t fnv64(uint64_t h, uint64_t v) { return fnv(h, &v, sizeof v); }
#define FNV0 0xcbf29ce484222325ULL
/* A deterministic value for (a, b, c): message contents. */
static inline uint64_t val3(uint64_t a, uint64_t b, uint64_t c) { return mix64(a * 1000003ULL ^ mix64(b * 7919ULL ^ mix64(c))); }

static inline void die(const char *what) {
  fprintf(stderr, "FAIL: %s\n", what);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
}
#define CHECK(cond, what) do { if (!(cond)) die(what); } while (0)

/* For the checkpoints before MPI_Init and after MPI_Finalize (mpi_cr.py --at pre-init|post-finalize): when
 * the variable `name` is set, say `what` on stderr (the driver waits for it) and sleep that many ms. */
static inline void nap(const char *name, const char *what) {
  const char *v = getenv(name);
  if (!v || !*v) return;
  fprintf(stderr, "mpi_cr: pid %ld %s\n", (long)getpid(), what);
  fflush(stderr);
  long ms = strtol(v, NULL, 10);
  while (ms > 0) { usleep(ms > 1000 ? 1000000 : (useconds_t)ms * 1000); ms -= 1000; }
}

/* The rank the launcher gave this process (its environment: before MPI_Init), or -1. */
static inline long launcher_rank(void) {
  const char *v = getenv("OMPI_COMM_WORLD_RANK");
  if (!v) v = getenv("PMI_RANK");
  return v ? strtol(v, NULL, 10) : -1;
}

/* MPI_Init, then the world's rank and size. MPI_CR_IN_INIT_MS (mpi_cr.py --at in-init): rank 0 holds
 * back before MPI_Init that long while the others wait for it inside MPI_Init (its PMI fence). */
static inline void start(int *argc, char ***argv, int *rank, int *size) {
  nap("MPI_CR_PRE_INIT_MS", "before MPI_Init");
  const int in_init = getenv("MPI_CR_IN_INIT_MS") != NULL;
  if (in_init && launcher_rank() == 0) nap("MPI_CR_IN_INIT_MS", "holding MPI_Init back");
  else if (in_init) {
    fprintf(stderr, "mpi_cr: pid %ld entering MPI_Init\n", (long)getpid());
    fflush(stderr);
  }
  MPI_Init(argc, argv);
  if (getenv("MPI_CR_PRE_INIT_MS") || in_init) {
    fprintf(stderr, "mpi_cr: pid %ld past MPI_Init\n", (long)getpid());
    fflush(stderr);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}

/* MPI_Finalize, then the nap for a checkpoint after it. */
static inline void finish(void) {
  MPI_Finalize();
  nap("MPI_CR_POST_FINALIZE_MS", "after MPI_Finalize");
}

/* argv[i] as a non-negative integer, or def when absent. */
static inline long arg_long(int argc, char **argv, int i, long def) {
  if (i >= argc) return def;
  char *end;
  long v = strtol(argv[i], &end, 10);
  if (*end || v < 0) {
    fprintf(stderr, "bad argument %d: %s\n", i, argv[i]);
    exit(2);
  }
  return v;
}

/* The per-rank digest h of iteration it, combined over ranks in rank order at rank 0 (MPI_Gather), and
 * the line printed: "<name> it <it> <digest>". Returns the combined digest at rank 0 (0 elsewhere). */
static inline uint64_t report(MPI_Comm comm, const char *name, long it, uint64_t h) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  uint64_t *all = rank == 0 ? (uint64_t *)malloc(sizeof(uint64_t) * size) : NULL;
  MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, comm);
  uint64_t d = 0;
  if (rank == 0) {
    d = FNV0;
    for (int r = 0; r < size; r++) d = fnv64(d, all[r]);
    printf("%s it %ld %016llx\n", name, it, (unsigned long long)d);
    fflush(stdout);
    free(all);
  }
  return d;
}
/* The last line: the digest of all iterations' digests. */
static inline void report_end(MPI_Comm comm, const char *name, long iters, uint64_t total) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    printf("%s done %ld iterations total %016llx\n", name, iters, (unsigned long long)total);
    fflush(stdout);
  }
}
#endif
