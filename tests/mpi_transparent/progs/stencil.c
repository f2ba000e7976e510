/* stencil STEPS SLEEP_US POINTS_PER_RANK [REPORT_EVERY]: 1-D heat equation, explicit, fixed ends, the
 * domain split into equal blocks with one halo cell each side exchanged by Isend/Irecv every step.
 * Every REPORT_EVERY steps (default 1) rank 0 prints a digest of the bit patterns of every rank's
 * values (the computation is the same on every MPI: no reduction of floating-point values); the time
 * each step took goes to stderr only (for benchmarks: bench/mpi), never to stdout. */
#include "common.h"
#include <time.h>

int main(int argc, char **argv) {
  int rank, size;
  start(&argc, &argv, &rank, &size);
  long steps = arg_long(argc, argv, 1, 40), sleep_us = arg_long(argc, argv, 2, 100000);
  long n = arg_long(argc, argv, 3, 100000), every = arg_long(argc, argv, 4, 1);
  CHECK(n >= 1 && every >= 1, "POINTS_PER_RANK and REPORT_EVERY must be positive");
  double *u = malloc(8 * (n + 2)), *v = malloc(8 * (n + 2));
  const long g0 = (long)rank * n; /* global index of u[1] */
  for (long i = 0; i < n + 2; i++) {
    long g = g0 + i - 1;
    u[i] = (double)(mix64((uint64_t)g) % 1000) / 10.0; /* a rough start */
  }
  const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  const double k = 0.25;
  uint64_t total = FNV0;
  for (long s = 0; s < steps; s++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    MPI_Request r[4];
    MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(&u[n + 1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &r[1]);
    MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &r[2]);
    MPI_Isend(&u[n], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &r[3]);
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    /* Fixed ends: the outermost cells of the domain keep their value. */
    for (long i = 1; i <= n; i++) {
      long g = g0 + i - 1;
      v[i] = (g == 0 || g == (long)size * n - 1) ? u[i] : u[i] + k * (u[i - 1] - 2 * u[i] + u[i + 1]);
    }
    double *t = u; u = v; v = t;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "stencil rank %d step %ld %.6f s\n", rank, s,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    if (sleep_us) usleep(sleep_us);
    if ((s + 1) % every == 0 || s + 1 == steps) {
      uint64_t h = fnv(fnv64(FNV0, s), &u[1], 8 * n);
      total = fnv64(total, report(MPI_COMM_WORLD, "stencil", s, h));
    }
  }
  report_end(MPI_COMM_WORLD, "stencil", steps, total);
  free(u);
  free(v);
  finish();
  return 0;
}
