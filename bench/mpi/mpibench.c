/* MPI kernels for bench/mpi (issue 7): the same binary runs natively and under revive.
 *   mpibench pingpong ITERS      8-byte ping-pong between ranks 0 and 1: "pingpong_us <half round trip>"
 *   mpibench bw ITERS            1 MiB messages 0 -> 1, acknowledged: "bw_mbs <MB/s>"
 *   mpibench allreduce ITERS     8-byte MPI_Allreduce loop: "allreduce_us <per call>"
 *   mpibench stencil STEPS N     1-D heat stencil, N doubles per rank, halo exchange: "step_us <per step>"
 *   mpibench mem MB SECONDS      MB of data per rank (touched), then a ring exchange every 20 ms for
 *                                SECONDS; rank 0 prints "ready" once all have their data and "tick K"
 *                                per round; at the end a checksum of all data (restart check).
 * Timings go to stdout from rank 0 only. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double now(void) { return MPI_Wtime(); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 3) {
    if (r == 0) fprintf(stderr, "usage: mpibench pingpong|bw|allreduce|stencil|mem ARGS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* mode = argv[1];
  long it = atol(argv[2]);
  if (strcmp(mode, "pingpong") == 0 || strcmp(mode, "bw") == 0) {
    size_t len = mode[0] == 'p' ? 8 : (1 << 20);
    char* buf = calloc(1, len);
    char ack = 0;
    for (int warm = 1; warm >= 0; warm--) {
      long iters = warm ? it / 10 + 1 : it;
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      for (long i = 0; i < iters && r < 2; i++) {
        if (r == 0) {
          MPI_Send(buf, (int)len, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
          if (len == 8) MPI_Recv(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          else MPI_Recv(&ack, 1, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buf, (int)len, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (len == 8) MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
          else MPI_Send(&ack, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
      }
      double t = now() - t0;
      if (!warm && r == 0) {
        if (len == 8) printf("pingpong_us %.3f\n", t / iters / 2 * 1e6);
        else printf("bw_mbs %.1f\n", (double)len * iters / t / 1e6);
      }
    }
  } else if (strcmp(mode, "allreduce") == 0) {
    double x = r, y = 0;
    for (int warm = 1; warm >= 0; warm--) {
      long iters = warm ? it / 10 + 1 : it;
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      for (long i = 0; i < iters; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      if (!warm && r == 0) printf("allreduce_us %.3f\n", (now() - t0) / iters * 1e6);
    }
  } else if (strcmp(mode, "stencil") == 0) {
    long cells = argc > 3 ? atol(argv[3]) : 1 << 20;
    double* a = calloc((size_t)cells + 2, sizeof(double));
    double* b = calloc((size_t)cells + 2, sizeof(double));
    for (long i = 1; i <= cells; i++) a[i] = (double)((r * cells + i) % 97);
    int left = (r + n - 1) % n, right = (r + 1) % n;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (long s = 0; s < it; s++) {
      MPI_Sendrecv(&a[1], 1, MPI_DOUBLE, left, 0, &a[cells + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(&a[cells], 1, MPI_DOUBLE, right, 1, &a[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      for (long i = 1; i <= cells; i++) b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
      double* t = a;
      a = b;
      b = t;
    }
    double t = now() - t0, sum = 0, all = 0;
    for (long i = 1; i <= cells; i++) sum += a[i];
    MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (r == 0) printf("step_us %.3f\nsum %.6e\n", t / it * 1e6, all);
  } else if (strcmp(mode, "mem") == 0) {
    size_t bytes = (size_t)it << 20;
    long secs = argc > 3 ? atol(argv[3]) : 60;
    uint64_t* d = malloc(bytes);
    for (size_t i = 0; i < bytes / 8; i++) d[i] = (i * 0x9E3779B97F4A7C15ull) ^ (uint64_t)r;
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) {
      printf("ready\n");
      fflush(stdout);
    }
    long rounds = secs * 50;
    uint64_t tok = 0;
    for (long k = 0; k < rounds; k++) {
      uint64_t in;
      MPI_Sendrecv(&tok, 1, MPI_UINT64_T, (r + 1) % n, 0, &in, 1, MPI_UINT64_T, (r + n - 1) % n, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      tok = in + d[(size_t)k % (bytes / 8)];
      if (r == 0) {
        printf("tick %ld\n", k);
        fflush(stdout);
      }
      usleep(20000);
    }
    uint64_t sum = 0, all = 0;
    for (size_t i = 0; i < bytes / 8; i++) sum += d[i];
    MPI_Reduce(&sum, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (r == 0) printf("checksum %016llx\n", (unsigned long long)all);
  }
  MPI_Finalize();
  return 0;
}
