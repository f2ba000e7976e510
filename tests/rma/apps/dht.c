/* dht.c -- the ftRMA paper's distributed key-value store (hash table of uint64 pairs).
 *
 * Exercises passive-target RMA on a window from MPI_Win_allocate:
 *   default: one MPI_Win_lock_all epoch for the whole run, MPI_Win_flush (after each wave of
 *            compare-and-swaps or gets, per target) and MPI_Win_flush_all (after the value
 *            updates and counter accumulates), MPI_Win_sync;
 *   --lock:  MPI_Win_lock / MPI_Win_unlock around every single operation instead
 *            (MPI_LOCK_EXCLUSIVE for the slot-claiming compare-and-swap, MPI_LOCK_SHARED for the
 *            other atomics and for the lookups);
 *   MPI_Compare_and_swap (claim a slot), MPI_Fetch_and_op(MPI_SUM) and
 *   MPI_Get_accumulate(MPI_SUM) (add to a value; alternately), MPI_Accumulate(MPI_SUM) (a per-rank
 *   operation counter), MPI_Get_accumulate(MPI_NO_OP) (read the own counter), MPI_Get (lookups).
 *
 * Each rank holds S slots (key, value) plus one counter cell; key 0 = empty.  A key lives on rank
 * hash(key) % nprocs, starting at slot hash'(key) % S, with linear probing.  Per phase: every rank
 * inserts/increments K keys from a deterministic per-rank generator (one in eight from a small
 * hot set, so several ranks hit the same key), adds to the owner's counter, flushes; barrier; then
 * every rank looks up its share of the whole key space (ids = rank mod nprocs) with MPI_Get and
 * folds found (key, value) pairs into a digest; barrier.  Rank 0 checks that the values found
 * add up to all deltas ever added and the counters to K*nprocs*phase, else it aborts (a lost or
 * duplicated update).  Which slot a key lands in depends on CAS races, but the digest only
 * depends on the set of (key, total value) pairs, so it is stable.  Only atomic
 * (accumulate-class) operations touch slots while several ranks may update them; MPI_Get only
 * runs between two barriers, when nothing is updated.  Slot claims and lookups are issued in
 * waves (all pending keys at once, then one completion) so that few round trips are needed.
 * Two MPICH 4.0.2 bugs are worked around (see win_bytes() and the lookup phase).
 *
 * usage: dht [--keyspace R] [--keys K] [--slots S] [--iters I] [--lock] [--sleep-ms MS] [--time]
 *   R distinct key ids (default 2048), K inserts per rank per phase (default 256),
 *   S slots per rank (default 2*ceil(R/nprocs)+64), I phases (default 5).
 * stdout (rank 0): "iter P digest <xor64> sum <sum64> keys <n> total <values> ops <n>" per phase,
 * then "done digest <chain64>".  The output depends on nprocs, not on --lock. */
#define _POSIX_C_SOURCE 200809L
#include "rma_app_common.h"

static const char *APP = "dht";

static int use_lock = 0;
static MPI_Win win;

static uint64_t key_of_id(uint64_t id) {
  uint64_t k = mix64(id * UINT64_C(0x100000001b3));
  return k ? k : 1;
}

static void lk(int type, int rank) {
  if (use_lock) MPI_Win_lock(type, rank, 0, win);
}
/* Complete the operation(s) to `rank`: lock_all mode flushes, --lock mode unlocks. */
static void done_with(int rank) {
  if (use_lock) MPI_Win_unlock(rank, win);
  else MPI_Win_flush(rank, win);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int timing = 0;

  uint64_t R = 2048, K = 256, S = 0, iters = 5, sleepms = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    if (!strcmp(a, "--lock")) use_lock = 1;
    else if (!strcmp(a, "--keyspace") && parse_u64(v, &R)) i++;
    else if (!strcmp(a, "--keys") && parse_u64(v, &K)) i++;
    else if (!strcmp(a, "--slots") && parse_u64(v, &S)) i++;
    else if (!strcmp(a, "--iters") && parse_u64(v, &iters)) i++;
    else if (!strcmp(a, "--sleep-ms") && parse_u64(v, &sleepms)) i++;
    else if (!strcmp(a, "--time")) timing = 1;
    else {
      if (me == 0)
        fprintf(stderr, "usage: %s [--keyspace R] [--keys K] [--slots S] [--iters I] [--lock] [--sleep-ms MS] [--time] (bad: %s)\n",
                APP, a);
      MPI_Finalize();
      return 2;
    }
  }
  if (R == 0 || R > (UINT64_C(1) << 40)) die(APP, "bad --keyspace");
  if (S == 0) S = 2 * ((R + (uint64_t)np - 1) / (uint64_t)np) + 64;
  if (S > (UINT64_C(1) << 28)) die(APP, "bad --slots");
  const uint64_t HOT = R < 16 ? R : 16;
  const MPI_Aint CNT = (MPI_Aint)(2 * S); /* displacement of the counter cell */

  uint64_t *tab = NULL;
  app_timer_start();
  MPI_Win_allocate(win_bytes((size_t)(2 * S + 1)), (int)sizeof(uint64_t), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &tab, &win);
  /* zero the local table inside an epoch on the own window, then make it visible */
  if (use_lock) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win);
    memset(tab, 0, (2 * S + 1) * sizeof(uint64_t));
    MPI_Win_unlock(me, win);
  } else {
    MPI_Win_lock_all(0, win);
    memset(tab, 0, (2 * S + 1) * sizeof(uint64_t));
    MPI_Win_sync(win);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* per-operation state; all RMA result buffers stay untouched until their op is completed */
  const uint64_t L = (R + (uint64_t)np - 1) / (uint64_t)np; /* max lookups per rank per phase */
  const uint64_t M = (K > L ? K : L) + 1;
  uint64_t *okey = malloc(M * sizeof(uint64_t));   /* key of op j */
  uint64_t *oslot = malloc(M * sizeof(uint64_t));  /* slot currently probed */
  uint64_t *oprobe = malloc(M * sizeof(uint64_t)); /* probe count */
  uint64_t *ores = malloc(2 * M * sizeof(uint64_t)); /* CAS old value / fetched value / Get (key,value) */
  uint64_t *odelta = malloc(M * sizeof(uint64_t));
  int *oowner = malloc(M * sizeof(int));
  uint64_t *pend = malloc(M * sizeof(uint64_t)); /* indices still probing */
  uint64_t *counts = calloc((size_t)np, sizeof(uint64_t));
  char *touched = calloc((size_t)np, 1);
  if (!okey || !oslot || !oprobe || !ores || !odelta || !oowner || !pend || !counts || !touched)
    die(APP, "out of memory");
  const uint64_t zero = 0;
  uint64_t chain = 0, added = 0; /* added: sum of all deltas this rank ever added */

  for (uint64_t ph = 1; ph <= iters; ph++) {
    /* ---- insert / increment phase ----
     * Claim slots in waves: one MPI_Compare_and_swap per still-unplaced key at its current probe
     * slot, then complete the wave (MPI_Win_flush per target touched, or the per-op unlock), then
     * advance the keys whose slot held a different key. */
    uint64_t npend = 0;
    for (uint64_t j = 0; j < K; j++) {
      uint64_t u = hash2(hash2(ph * UINT64_C(0x51ed27), (uint64_t)me), j);
      uint64_t id = (j % 8 == 0) ? (u % HOT) + 1 : (u >> 3) % R + 1;
      okey[j] = key_of_id(id);
      odelta[j] = hash2(okey[j], ph) % 1000 + 1 + (uint64_t)me;
      oowner[j] = (int)(hash2(okey[j], 1) % (uint64_t)np);
      oslot[j] = hash2(okey[j], 2) % S;
      oprobe[j] = 0;
      added += odelta[j];
      pend[npend++] = j;
    }
    while (npend) {
      memset(touched, 0, (size_t)np);
      for (uint64_t q = 0; q < npend; q++) {
        uint64_t j = pend[q];
        lk(MPI_LOCK_EXCLUSIVE, oowner[j]);
        MPI_Compare_and_swap(&okey[j], &zero, &ores[j], MPI_UINT64_T, oowner[j], (MPI_Aint)(2 * oslot[j]), win);
        if (use_lock) MPI_Win_unlock(oowner[j], win);
        touched[oowner[j]] = 1;
      }
      if (!use_lock)
        for (int t = 0; t < np; t++)
          if (touched[t]) MPI_Win_flush(t, win);
      uint64_t keep = 0;
      for (uint64_t q = 0; q < npend; q++) {
        uint64_t j = pend[q];
        if (ores[j] == 0 || ores[j] == okey[j]) continue; /* claimed now or by an earlier insert */
        if (++oprobe[j] == S) die(APP, "hash table full (raise --slots)");
        oslot[j] = (oslot[j] + 1) % S;
        pend[keep++] = j;
      }
      npend = keep;
    }
    memset(counts, 0, (size_t)np * sizeof(uint64_t));
    for (uint64_t j = 0; j < K; j++) {
      int owner = oowner[j];
      lk(MPI_LOCK_SHARED, owner);
      if (j & 1)
        MPI_Fetch_and_op(&odelta[j], &ores[j], MPI_UINT64_T, owner, (MPI_Aint)(2 * oslot[j] + 1), MPI_SUM, win);
      else
        MPI_Get_accumulate(&odelta[j], 1, MPI_UINT64_T, &ores[j], 1, MPI_UINT64_T, owner,
                           (MPI_Aint)(2 * oslot[j] + 1), 1, MPI_UINT64_T, MPI_SUM, win);
      if (use_lock) MPI_Win_unlock(owner, win); /* lock_all: completed by the flush_all below */
      counts[owner]++;
    }
    for (int k = 0; k < np; k++) {
      int t = (me + k) % np;
      if (!counts[t]) continue;
      lk(MPI_LOCK_SHARED, t);
      MPI_Accumulate(&counts[t], 1, MPI_UINT64_T, t, CNT, 1, MPI_UINT64_T, MPI_SUM, win);
      if (use_lock) MPI_Win_unlock(t, win);
    }
    if (!use_lock) MPI_Win_flush_all(win);
    MPI_Barrier(MPI_COMM_WORLD);

    /* ---- lookup phase: read-only, so plain MPI_Get is race-free ----
     * Waves of MPI_Get (slot key and value), completed with MPI_Win_flush per target touched.
     * (Not MPI_Win_flush_all: with MPICH 4.0.2 ch4:ucx it returns before outstanding MPI_Get to
     * other ranks have completed -- the result buffers still hold old data; atomics are fine.) */
    uint64_t found = 0, total = 0, loc[2] = {0, 0};
    npend = 0;
    for (uint64_t id = (uint64_t)me + 1; id <= R; id += (uint64_t)np) {
      uint64_t j = npend;
      okey[j] = key_of_id(id);
      oowner[j] = (int)(hash2(okey[j], 1) % (uint64_t)np);
      oslot[j] = hash2(okey[j], 2) % S;
      oprobe[j] = 0;
      pend[npend++] = j;
    }
    while (npend) {
      memset(touched, 0, (size_t)np);
      for (uint64_t q = 0; q < npend; q++) {
        uint64_t j = pend[q];
        lk(MPI_LOCK_SHARED, oowner[j]);
        MPI_Get(&ores[2 * j], 2, MPI_UINT64_T, oowner[j], (MPI_Aint)(2 * oslot[j]), 2, MPI_UINT64_T, win);
        if (use_lock) MPI_Win_unlock(oowner[j], win);
        touched[oowner[j]] = 1;
      }
      if (!use_lock)
        for (int t = 0; t < np; t++)
          if (touched[t]) MPI_Win_flush(t, win);
      uint64_t keep = 0;
      for (uint64_t q = 0; q < npend; q++) {
        uint64_t j = pend[q], k = ores[2 * j], v = ores[2 * j + 1];
        if (k == 0) continue; /* absent */
        if (k == okey[j]) {
          uint64_t h = hash2(k, v);
          found++;
          total += v;
          loc[0] ^= h;
          loc[1] += h >> 1;
          continue;
        }
        if (++oprobe[j] == S) continue; /* full table, key absent */
        oslot[j] = (oslot[j] + 1) % S;
        pend[keep++] = j;
      }
      npend = keep;
    }
    /* own operation counter, read atomically */
    uint64_t ops = 0;
    lk(MPI_LOCK_SHARED, me);
    MPI_Get_accumulate(NULL, 0, MPI_UINT64_T, &ops, 1, MPI_UINT64_T, me, CNT, 1, MPI_UINT64_T, MPI_NO_OP, win);
    done_with(me);
    loc[0] ^= hash2(ops, (uint64_t)me + UINT64_C(0xc0));

    uint64_t glob[2], sums[4], gsums[4] = {0, 0, 0, 0};
    reduce_digest(loc, glob);
    sums[0] = found;
    sums[1] = total;
    sums[2] = ops;
    sums[3] = added;
    MPI_Reduce(sums, gsums, 4, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    /* self-check: no update may be lost or duplicated */
    if (me == 0 && (gsums[1] != gsums[3] || gsums[2] != ph * K * (uint64_t)np || gsums[0] > R)) {
      fprintf(stderr, "%s: phase %" PRIu64 ": found total %" PRIu64 " (expected %" PRIu64 "), ops %" PRIu64
              " (expected %" PRIu64 "), keys %" PRIu64 "\n", APP, ph, gsums[1], gsums[3], gsums[2],
              ph * K * (uint64_t)np, gsums[0]);
      die(APP, "inconsistent table");
    }
    chain = chain_digest(chain, glob);
    if (me == 0) {
      printf("iter %" PRIu64 " digest %016" PRIx64 " sum %016" PRIx64 " keys %" PRIu64 " total %" PRIu64
             " ops %" PRIu64 "\n",
             ph, glob[0], glob[1], gsums[0], gsums[1], gsums[2]);
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* no rank updates a slot while another may still MPI_Get it */
    sleep_ms(sleepms);
  }
  if (me == 0) {
    printf("done digest %016" PRIx64 "\n", chain);
    fflush(stdout);
  }
  if (!use_lock) MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  free(okey);
  free(oslot);
  free(oprobe);
  free(ores);
  free(odelta);
  free(oowner);
  free(pend);
  free(counts);
  free(touched);
  app_timer_report(timing);
  MPI_Finalize();
  return 0;
}
