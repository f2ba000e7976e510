/* stencil.c -- 2-D 5-point stencil (integer, mod 2^64) with halo exchange by MPI_Put.
 *
 * Exercises: MPI_Win_create over malloc'd memory (interior rows + two halo rows + one cell for a
 * global sum), active-target synchronisation with MPI_Win_fence (default) or with
 * MPI_Win_post / MPI_Win_start / MPI_Win_complete / MPI_Win_wait on the neighbour groups
 * (--pscw), MPI_Put of boundary rows into the neighbours' halo rows, and with --acc an
 * MPI_Accumulate(MPI_SUM) of every rank's partial sum into rank 0's sum cell inside the same
 * epoch (checked against an MPI_Reduce; a mismatch aborts).
 *
 * Global grid ROWS x COLS of uint64, split in 1-D blocks of rows (sizes may differ by one),
 * periodic in the column direction, fixed boundary rows above row 0 and below the last row.
 * One iteration: epoch { put my first row to the upper neighbour's bottom halo, my last row to
 * the lower neighbour's top halo, [--acc: accumulate my partial sum into rank 0] }; then every
 * interior cell gets f(centre, north, south, west, east, iteration) (a Jacobi sweep: computed into
 * a scratch buffer, then copied back).  Halo rows are only written remotely inside an epoch and
 * only read locally outside it; interior rows are only read by the puts inside an epoch.
 * The result does not depend on nprocs nor on fence/PSCW.  In PSCW mode rank 0 adds its own
 * partial sum locally after MPI_Win_wait (so it needs no self-access epoch).
 *
 * usage: stencil [--rows R] [--cols C] [--iters I] [--pscw] [--acc] [--sleep-ms MS] [--time]
 *   R (default 64) >= nprocs, C default 64, I default 5.
 * stdout (rank 0): "iter K digest <xor64> sum <sum64>[ acc <sum64>]" per iteration,
 * "done digest <chain64>". */
#define _POSIX_C_SOURCE 200809L
#include "rma_app_common.h"

static const char *APP = "stencil";

static uint64_t rows_of(uint64_t R, int np, int r) { return R / (uint64_t)np + ((uint64_t)r < R % (uint64_t)np); }
static uint64_t first_row_of(uint64_t R, int np, int r) {
  uint64_t q = R / (uint64_t)np, m = R % (uint64_t)np, rr = (uint64_t)r;
  return rr * q + (rr < m ? rr : m);
}

static MPI_Group make_group(MPI_Group world, const int *ranks, int n) {
  MPI_Group g;
  MPI_Group_incl(world, n, ranks, &g);
  return g;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int timing = 0;

  uint64_t R = 64, C = 64, iters = 5, sleepms = 0;
  int pscw = 0, acc = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    if (!strcmp(a, "--pscw")) pscw = 1;
    else if (!strcmp(a, "--acc")) acc = 1;
    else if (!strcmp(a, "--rows") && parse_u64(v, &R)) i++;
    else if (!strcmp(a, "--cols") && parse_u64(v, &C)) i++;
    else if (!strcmp(a, "--iters") && parse_u64(v, &iters)) i++;
    else if (!strcmp(a, "--sleep-ms") && parse_u64(v, &sleepms)) i++;
    else if (!strcmp(a, "--time")) timing = 1;
    else {
      if (me == 0)
        fprintf(stderr, "usage: %s [--rows R] [--cols C] [--iters I] [--pscw] [--acc] [--sleep-ms MS] [--time] (bad: %s)\n", APP,
                a);
      MPI_Finalize();
      return 2;
    }
  }
  if (R < (uint64_t)np || C < 1 || R > (UINT64_C(1) << 24) || C > (UINT64_C(1) << 24) || (R / (uint64_t)np + 2) * C > (UINT64_C(1) << 28))
    die(APP, "need nprocs <= ROWS and a reasonable grid size");

  const uint64_t nl = rows_of(R, np, me), g0 = first_row_of(R, np, me);
  const int up = me > 0 ? me - 1 : -1, down = me + 1 < np ? me + 1 : -1;
  const size_t cells = (size_t)((nl + 2) * C);
  uint64_t *u = malloc((cells + 1) * sizeof(uint64_t)); /* [halo | nl rows | halo | sum cell] */
  uint64_t *tmp = malloc((size_t)(nl * C) * sizeof(uint64_t));
  if (!u || !tmp) die(APP, "out of memory");
  uint64_t *sumcell = u + cells;
  for (uint64_t j = 0; j < C; j++) {
    u[j] = mix64(j + UINT64_C(0x7070));                       /* top boundary (rank 0 keeps it) */
    u[(nl + 1) * C + j] = mix64(j + UINT64_C(0xb0b0b0));      /* bottom boundary (last rank) */
  }
  for (uint64_t i = 0; i < nl; i++)
    for (uint64_t j = 0; j < C; j++) u[(i + 1) * C + j] = mix64(((g0 + i) * C + j) ^ UINT64_C(0x57e9c11));
  *sumcell = 0;

  MPI_Win win;
  app_timer_start();
  MPI_Win_create(u, (MPI_Aint)((cells + 1) * sizeof(uint64_t)), (int)sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                 &win);

  /* PSCW groups: access = ranks I put/accumulate to; exposure = ranks that put/accumulate to me */
  MPI_Group world, g_access = MPI_GROUP_NULL, g_expose = MPI_GROUP_NULL;
  int n_access = 0, n_expose = 0;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  if (pscw) {
    int *ra = malloc((size_t)np * sizeof(int)), *re = malloc((size_t)np * sizeof(int));
    if (!ra || !re) die(APP, "out of memory");
    for (int r = 0; r < np; r++) {
      if (r == me) continue;
      int nb = (r == up || r == down);
      if (nb || (acc && r == 0)) ra[n_access++] = r;
      if (nb || (acc && me == 0)) re[n_expose++] = r;
    }
    g_access = make_group(world, ra, n_access);
    g_expose = make_group(world, re, n_expose);
    free(ra);
    free(re);
  }
  const MPI_Aint disp_up_halo = up >= 0 ? (MPI_Aint)((rows_of(R, np, up) + 1) * C) : 0; /* up's bottom halo */
  const MPI_Aint disp_sum0 = (MPI_Aint)((rows_of(R, np, 0) + 2) * C);                  /* rank 0's sum cell */

  if (!pscw) MPI_Win_fence(0, win);
  uint64_t chain = 0;
  for (uint64_t it = 1; it <= iters; it++) {
    uint64_t part = 0; /* my partial sum of the grid before this sweep */
    for (uint64_t k = C; k < (nl + 1) * C; k++) part += u[k];

    /* ---- halo exchange epoch ---- */
    if (pscw) {
      if (n_expose) MPI_Win_post(g_expose, 0, win);
      if (n_access) MPI_Win_start(g_access, 0, win);
    }
    if (up >= 0) MPI_Put(&u[C], (int)C, MPI_UINT64_T, up, disp_up_halo, (int)C, MPI_UINT64_T, win);
    if (down >= 0) MPI_Put(&u[nl * C], (int)C, MPI_UINT64_T, down, 0, (int)C, MPI_UINT64_T, win);
    if (acc && !(pscw && me == 0))
      MPI_Accumulate(&part, 1, MPI_UINT64_T, 0, disp_sum0, 1, MPI_UINT64_T, MPI_SUM, win);
    if (pscw) {
      if (n_access) MPI_Win_complete(win);
      if (n_expose) MPI_Win_wait(win);
    } else {
      MPI_Win_fence(0, win);
    }

    /* ---- global sum check (--acc) ---- */
    uint64_t accv = 0;
    if (acc) {
      uint64_t ref = 0;
      MPI_Reduce(&part, &ref, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
      if (me == 0) {
        accv = *sumcell + (pscw ? part : 0);
        *sumcell = 0; /* nobody targets the cell until the next epoch opens */
        if (accv != ref) {
          fprintf(stderr, "%s: iter %" PRIu64 ": accumulated sum %016" PRIx64 " != reduced sum %016" PRIx64 "\n", APP,
                  it, accv, ref);
          die(APP, "MPI_Accumulate result is wrong");
        }
      }
    }

    /* ---- Jacobi sweep ---- */
    const uint64_t itc = it * UINT64_C(0x9e3779b97f4a7c15);
    for (uint64_t i = 1; i <= nl; i++)
      for (uint64_t j = 0; j < C; j++) {
        uint64_t c = u[i * C + j], n = u[(i - 1) * C + j], s = u[(i + 1) * C + j];
        uint64_t w = u[i * C + (j + C - 1) % C], e = u[i * C + (j + 1) % C];
        tmp[(i - 1) * C + j] = rotl64(c, 7) * 3 + n + 5 * s + (w ^ rotl64(e, 17)) + itc;
      }
    memcpy(&u[C], tmp, (size_t)(nl * C) * sizeof(uint64_t));
    if (!pscw) MPI_Win_fence(0, win); /* closes the local-update phase, opens the next exchange */

    /* ---- digest ---- */
    uint64_t loc[2] = {0, 0}, glob[2];
    for (uint64_t i = 0; i < nl; i++)
      for (uint64_t j = 0; j < C; j++) {
        uint64_t h = hash2(u[(i + 1) * C + j], (g0 + i) * C + j);
        loc[0] ^= h;
        loc[1] += h >> 1;
      }
    reduce_digest(loc, glob);
    chain = chain_digest(chain, glob);
    if (acc) chain = hash2(chain, accv);
    if (me == 0) {
      if (acc)
        printf("iter %" PRIu64 " digest %016" PRIx64 " sum %016" PRIx64 " acc %016" PRIx64 "\n", it, glob[0], glob[1],
               accv);
      else
        printf("iter %" PRIu64 " digest %016" PRIx64 " sum %016" PRIx64 "\n", it, glob[0], glob[1]);
      fflush(stdout);
    }
    sleep_ms(sleepms);
  }
  if (me == 0) {
    printf("done digest %016" PRIx64 "\n", chain);
    fflush(stdout);
  }
  if (!pscw) MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  MPI_Win_free(&win);
  if (pscw) {
    if (g_access != MPI_GROUP_EMPTY) MPI_Group_free(&g_access);
    if (g_expose != MPI_GROUP_EMPTY) MPI_Group_free(&g_expose);
  }
  MPI_Group_free(&world);
  free(u);
  free(tmp);
  app_timer_report(timing);
  MPI_Finalize();
  return 0;
}
