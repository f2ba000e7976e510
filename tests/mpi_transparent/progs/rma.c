/* rma ITERS SLEEP_US: MPI-3 one-sided communication under checkpoint/restart (issue 7). Two windows:
 * one from MPI_Win_allocate, one from MPI_Win_create over malloc'ed memory, both kept for the whole run.
 * Per iteration:
 *  - fence epoch: Put to the right neighbour's allocated window, Get from the left one's created window;
 *  - post-start-complete-wait with the neighbours: Put and Accumulate (SUM) into both of them;
 *  - passive target: lock_all, Fetch_and_op (+1) on a counter at a target that changes per iteration
 *    (the fetched values are the same set whatever the order, sorted at rank 0), Compare_and_swap on the
 *    rank's own slot there (one that succeeds and one that must fail), Accumulate, flush, unlock_all;
 *  - a spin lock made of Compare_and_swap on one word of rank 0 (exclusive lock/unlock, flush), guarding a
 *    read-modify-write of a shared counter by Get/Put: contended, its final value is deterministic.
 * One rank sleeps inside each epoch, so a checkpoint finds the others waiting in fence/wait/lock.
 * Open MPI 4.1: run with --mca osc ucx (or pt2pt); its default osc rdma crashes in Compare_and_swap. */
#include "common.h"

enum { W = 64 };                                   /* int64 per window */
enum { CNT = 0, CAS0 = 8, LOCKW = 40, SHARED = 41 }; /* offsets in the allocated window */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int rank, size;
  start(&argc, &argv, &rank, &size);
  long iters = arg_long(argc, argv, 1, 40), sleep_us = arg_long(argc, argv, 2, 100000);
  CHECK(size >= 2 && size <= 32, "rma needs 2..32 ranks");
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int64_t *a, *c = calloc(W, 8);
  MPI_Win wa, wc;
  MPI_Win_allocate(W * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &a, &wa);
  MPI_Win_create(c, W * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &wc);
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, wa);
  memset(a, 0, W * 8);
  MPI_Win_unlock(rank, wa);
  /* The neighbours' group for post/start (one rank when there are two). */
  MPI_Group world_g, nb_g;
  MPI_Comm_group(MPI_COMM_WORLD, &world_g);
  int nbr[2] = {left, right};
  MPI_Group_incl(world_g, left == right ? 1 : 2, nbr, &nb_g);
  uint64_t *fetched = malloc(8 * size), total = FNV0;
  MPI_Barrier(MPI_COMM_WORLD);

  for (long it = 0; it < iters; it++) {
    uint64_t h = fnv64(FNV0, it);
    const int slow = (int)(it % size);
    /* Fence: the window contents are exposed and written between two fences. */
    MPI_Win_fence(0, wa);
    MPI_Win_fence(0, wc);
    c[1] = (int64_t)val3(rank, it, 1);
    MPI_Win_fence(0, wc);
    int64_t v[4] = {(int64_t)val3(rank, it, 2), (int64_t)val3(rank, it, 3), (int64_t)val3(rank, it, 4), rank}, g[2];
    MPI_Put(v, 4, MPI_INT64_T, right, 16, 4, MPI_INT64_T, wa);
    MPI_Get(g, 1, MPI_INT64_T, left, 1, 1, MPI_INT64_T, wc);
    if (rank == slow) usleep(sleep_us / 4);
    MPI_Win_fence(0, wc);
    MPI_Win_fence(0, wa);
    CHECK(g[0] == (int64_t)val3(left, it, 1), "Get in a fence epoch");
    CHECK(a[16] == (int64_t)val3(left, it, 2) && a[19] == left, "Put in a fence epoch");
    h = fnv(fnv(h, g, 8), a + 16, 32);

    /* Post-start-complete-wait with the neighbours: each puts into the right one and accumulates into both. */
    MPI_Win_post(nb_g, 0, wc);
    MPI_Win_start(nb_g, 0, wc);
    int64_t pv = (int64_t)val3(rank, it, 5), one = 1 + rank;
    MPI_Put(&pv, 1, MPI_INT64_T, right, 2 + (left == right ? 0 : 0), 1, MPI_INT64_T, wc);
    MPI_Accumulate(&one, 1, MPI_INT64_T, right, 3, 1, MPI_INT64_T, MPI_SUM, wc);
    if (left != right) MPI_Accumulate(&one, 1, MPI_INT64_T, left, 3, 1, MPI_INT64_T, MPI_SUM, wc);
    if (rank == slow) usleep(sleep_us / 4);
    MPI_Win_complete(wc);
    MPI_Win_wait(wc);
    CHECK(c[2] == (int64_t)val3(left, it, 5), "Put in a PSCW epoch");
    h = fnv(h, c + 2, 16);
    c[3] = 0;

    /* Passive target at `tgt`: Fetch_and_op, Compare_and_swap, Accumulate, flush. */
    const int tgt = (int)((it * 3 + 1) % size);
    MPI_Win_lock_all(0, wa);
    int64_t inc = 1, old;
    if (rank == slow) usleep(sleep_us / 8);
    MPI_Fetch_and_op(&inc, &old, MPI_INT64_T, tgt, CNT, MPI_SUM, wa);
    MPI_Win_flush(tgt, wa);
    int64_t prev_cas = it == 0 ? 0 : (int64_t)val3(rank, it - 1, 6), swap = (int64_t)val3(rank, it, 6), res;
    /* Our own slot at tgt holds what we swapped in when tgt was last ours, or 0: read it first. */
    int64_t cur;
    MPI_Fetch_and_op(NULL, &cur, MPI_INT64_T, tgt, CAS0 + rank, MPI_NO_OP, wa);
    MPI_Win_flush(tgt, wa);
    (void)prev_cas;
    MPI_Compare_and_swap(&swap, &cur, &res, MPI_INT64_T, tgt, CAS0 + rank, wa);
    MPI_Win_flush(tgt, wa);
    CHECK(res == cur, "Compare_and_swap with the current value must succeed");
    int64_t wrong = cur + 1, res2;
    MPI_Compare_and_swap(&inc, &wrong, &res2, MPI_INT64_T, tgt, CAS0 + rank, wa);
    MPI_Win_flush(tgt, wa);
    CHECK(res2 == swap, "Compare_and_swap with a wrong value must fail and return the value");
    int64_t acc[2] = {rank + 1, (int64_t)val3(rank, it, 7) % 1000};
    MPI_Accumulate(acc, 2, MPI_INT64_T, tgt, 48, 2, MPI_INT64_T, MPI_SUM, wa);
    MPI_Win_flush_all(wa);
    MPI_Win_unlock_all(wa);
    MPI_Gather(&old, 1, MPI_INT64_T, fetched, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      qsort(fetched, size, 8, cmp_u64);
      for (int k = 1; k < size; k++) CHECK(fetched[k] == fetched[k - 1] + 1, "Fetch_and_op values not consecutive");
      h = fnv(h, fetched, 8 * size);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == tgt) { /* the accumulated sums and every rank's swapped-in value, read by the owner */
      MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, wa);
      h = fnv(h, a + 48, 16);
      h = fnv(h, a + CAS0, 8 * size);
      h = fnv64(h, (uint64_t)a[CNT]);
      MPI_Win_unlock(rank, wa);
    }

    /* A spin lock of Compare_and_swap on rank 0's LOCKW, guarding SHARED += rank + 1 by Get/Put. */
    {
      int64_t zero = 0, me = rank + 1, got;
      for (;;) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wa);
        MPI_Compare_and_swap(&me, &zero, &got, MPI_INT64_T, 0, LOCKW, wa);
        MPI_Win_unlock(0, wa);
        if (got == 0) break;
        usleep(200);
      }
      int64_t sh;
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wa);
      MPI_Get(&sh, 1, MPI_INT64_T, 0, SHARED, 1, MPI_INT64_T, wa);
      MPI_Win_flush(0, wa);
      if (rank == slow) usleep(sleep_us / 8); /* the others spin meanwhile */
      sh += rank + 1;
      MPI_Put(&sh, 1, MPI_INT64_T, 0, SHARED, 1, MPI_INT64_T, wa);
      MPI_Win_unlock(0, wa);
      MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wa);
      MPI_Compare_and_swap(&zero, &me, &got, MPI_INT64_T, 0, LOCKW, wa);
      MPI_Win_unlock(0, wa);
      CHECK(got == me, "the spin lock was not ours");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wa);
      CHECK(a[SHARED] == (it + 1) * size * (size + 1) / 2, "the counter guarded by the spin lock");
      h = fnv64(h, (uint64_t)a[SHARED]);
      MPI_Win_unlock(0, wa);
    }
    usleep(sleep_us / 2);
    total = fnv64(total, report(MPI_COMM_WORLD, "rma", it, h));
  }
  MPI_Group_free(&nb_g);
  MPI_Group_free(&world_g);
  MPI_Win_free(&wc);
  MPI_Win_free(&wa);
  free(c);
  report_end(MPI_COMM_WORLD, "rma", iters, total);
  finish();
  return 0;
}
