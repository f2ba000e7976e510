/* many_wins.c -- a passive-target code with many windows, for the in-job rebuild of a dead rank's
 * windows (tests/rma/rank_rebuild.sh): it once covered only the first 8 windows of a program.
 *
 * Exercises: W windows from MPI_Win_allocate, each of a different size (so their padded copies differ),
 * MPI_Win_lock / MPI_Put / MPI_Win_unlock, MPI_Barrier (the sync point where librevive_rma checkpoints
 * every passive-target window at once: the Locks scheme), MPI_Reduce digests.
 *
 * Window w holds np slices of C_w = 16 + 4*w uint64 cells; slice r is written by rank r only. One
 * iteration: every rank puts a fresh slice (a function of iteration, window, writer and cell) into
 * window w of rank (me + 1 + w) % np, one lock epoch per put; then a barrier; then each rank reads
 * its own windows under a shared lock of itself and adds them to the digest. The output does not
 * depend on timing, only on nprocs.
 *
 * usage: many_wins [--wins W] [--iters I] [--sleep-ms MS]   (W default 11, I default 5)
 * stdout (rank 0): "iter K digest <xor64> sum <sum64>" per iteration, "done digest <chain64>". */
#define _POSIX_C_SOURCE 200809L
#include "rma_app_common.h"

static const char *APP = "many_wins";

int main(int argc, char **argv) {
  int me, np;
  app_init(&argc, &argv, &me, &np);
  uint64_t nw = 11, iters = 5, sleepms = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--wins") && parse_u64(v, &nw)) i++;
    else if (!strcmp(argv[i], "--iters") && parse_u64(v, &iters)) i++;
    else if (!strcmp(argv[i], "--sleep-ms") && parse_u64(v, &sleepms)) i++;
    else {
      if (me == 0) fprintf(stderr, "usage: %s [--wins W] [--iters I] [--sleep-ms MS] (bad: %s)\n", APP, argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  if (nw == 0 || nw > 256) die(APP, "W must be in 1..256");

  MPI_Win *win = malloc(nw * sizeof(MPI_Win));
  uint64_t **base = malloc(nw * sizeof(uint64_t *));
  uint64_t *slice = malloc((16 + 4 * nw) * sizeof(uint64_t));
  if (!win || !base || !slice) die(APP, "out of memory");
  for (size_t w = 0; w < nw; w++) {
    const size_t cells = (size_t)np * (16 + 4 * w);
    MPI_Win_allocate(win_bytes(cells), (int)sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base[w], &win[w]);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win[w]);
    memset(base[w], 0, cells * sizeof(uint64_t));
    MPI_Win_unlock(me, win[w]);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  uint64_t chain = 0;
  for (uint64_t it = 1; it <= iters; it++) {
    for (size_t w = 0; w < nw; w++) {
      const size_t c = 16 + 4 * w;
      const int t = (int)((me + 1 + w) % (size_t)np);
      for (size_t i = 0; i < c; i++) slice[i] = hash2(it * UINT64_C(0x9e3779b97f4a7c15) ^ (w << 32) ^ (uint64_t)me, i);
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win[w]);
      MPI_Put(slice, (int)c, MPI_UINT64_T, t, (MPI_Aint)((size_t)me * c), (int)c, MPI_UINT64_T, win[w]);
      MPI_Win_unlock(t, win[w]);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* every put of this iteration is complete everywhere */
    uint64_t loc[2] = {0, 0};
    for (size_t w = 0; w < nw; w++) {
      const size_t cells = (size_t)np * (16 + 4 * w);
      MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win[w]);
      for (size_t i = 0; i < cells; i++) {
        const uint64_t h = hash2(base[w][i], ((uint64_t)me << 40) ^ (w << 20) ^ i);
        loc[0] ^= h;
        loc[1] += h >> 1;
      }
      MPI_Win_unlock(me, win[w]);
    }
    report_iter(me, it, loc, &chain);
    /* No rank writes the next iteration's slices while another still reads this one's. */
    MPI_Barrier(MPI_COMM_WORLD);
    sleep_ms(sleepms);
  }
  if (me == 0) {
    printf("done digest %016" PRIx64 "\n", chain);
    fflush(stdout);
  }
  for (size_t w = 0; w < nw; w++) MPI_Win_free(&win[w]);
  free(slice);
  free(base);
  free(win);
  MPI_Finalize();
  return 0;
}
