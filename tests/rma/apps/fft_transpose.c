/* fft_transpose.c -- shape of the ftRMA paper's NAS 3-D FFT port, with integer arithmetic.
 *
 * Exercises: MPI_Win_allocate, active-target synchronisation with MPI_Win_fence, an all-to-all
 * transpose done with MPI_Put into the target ranks' windows (default) or with MPI_Get from the
 * source ranks' windows (--get), MPI_Reduce(MPI_BXOR / MPI_SUM) digests.
 *
 * Each rank owns a slab of NB = N/nprocs x-planes of an N x N x N uint64 array (layout
 * [x][y][z], z contiguous).  One iteration = a few rounds of a deterministic mixing transform
 * along z (fully local), then the global transpose B[x][y][z] = A[z][y][x]: every rank packs
 * the block destined for each rank and moves it with one MPI_Put (or MPI_Get) per z-plane.
 * The window holds [data slab | exchange slab]; the data slab is never accessed remotely.
 *   put mode: fence; MPI_Put packed blocks into the target's exchange slab; fence; unpack.
 *   get mode: pack into own exchange slab; fence; MPI_Get from every source's exchange slab
 *             into a private buffer; fence; unpack.
 * The result does not depend on nprocs nor on put/get: stdout is identical for all of them.
 *
 * usage: fft_transpose [--n N] [--iters I] [--rounds R] [--get] [--sleep-ms MS] [--time]
 *   N (default 32) must be divisible by nprocs; I default 5; R default 3.
 * stdout (rank 0): "iter K digest <xor64> sum <sum64>" per iteration, "done digest <chain64>". */
#define _POSIX_C_SOURCE 200809L
#include "rma_app_common.h"

static const char *APP = "fft_transpose";

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int timing = 0;

  uint64_t n = 32, iters = 5, rounds = 3, sleepms = 0;
  int use_get = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    if (!strcmp(a, "--get")) use_get = 1;
    else if (!strcmp(a, "--n") && parse_u64(v, &n)) i++;
    else if (!strcmp(a, "--iters") && parse_u64(v, &iters)) i++;
    else if (!strcmp(a, "--rounds") && parse_u64(v, &rounds)) i++;
    else if (!strcmp(a, "--sleep-ms") && parse_u64(v, &sleepms)) i++;
    else if (!strcmp(a, "--time")) timing = 1;
    else {
      if (me == 0)
        fprintf(stderr, "usage: %s [--n N] [--iters I] [--rounds R] [--get] [--sleep-ms MS] [--time] (bad: %s)\n", APP, a);
      MPI_Finalize();
      return 2;
    }
  }
  if (n == 0 || n % (uint64_t)np != 0 || n > 1024) die(APP, "N must be in 1..1024 and divisible by nprocs");

  const size_t N = (size_t)n, NB = N / (size_t)np;
  const size_t slab = NB * N * N; /* elements per rank */
  const size_t blk = NB * N * NB;  /* elements one rank sends to another */
  const size_t plane = N * NB;     /* one z-plane of a block: the unit of one put/get */

  uint64_t *base = NULL;
  MPI_Win win;
  app_timer_start();
  MPI_Win_allocate(win_bytes(2 * slab), (int)sizeof(uint64_t), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &base, &win);
  uint64_t *data = base;        /* local slab, [xl][y][z] */
  uint64_t *xch = base + slab;  /* exchange slab, target of puts / source of gets */
  uint64_t *priv = malloc(slab * sizeof(uint64_t)); /* put: packed send buffer; get: receive buffer */
  uint64_t *line = malloc(N * sizeof(uint64_t));
  if (!priv || !line) die(APP, "out of memory");

  const size_t x0 = (size_t)me * NB;
  for (size_t xl = 0; xl < NB; xl++)
    for (size_t y = 0; y < N; y++)
      for (size_t z = 0; z < N; z++) {
        uint64_t g = ((x0 + xl) * N + y) * N + z;
        data[(xl * N + y) * N + z] = mix64(g ^ UINT64_C(0x5eed0f7));
      }
  memset(xch, 0, slab * sizeof(uint64_t));
  MPI_Win_fence(0, win); /* make the initial local stores part of a closed epoch */

  uint64_t chain = 0;
  for (uint64_t it = 1; it <= iters; it++) {
    /* 1. local transform along z (contiguous, entirely local) */
    const uint64_t C1 = UINT64_C(0x2545f4914f6cdd1d);
    for (size_t xl = 0; xl < NB; xl++)
      for (size_t y = 0; y < N; y++) {
        uint64_t *v = &data[(xl * N + y) * N];
        for (uint64_t r = 0; r < rounds; r++) {
          memcpy(line, v, N * sizeof(uint64_t));
          for (size_t i = 0; i < N; i++) {
            uint64_t prev = line[(i + N - 1) % N], next = line[(i + 1) % N];
            v[i] = line[i] * C1 + (prev ^ (next >> 7)) + ((it * UINT64_C(0x9e3779b97f4a7c15)) ^ r);
          }
        }
      }

    /* 2. pack: block for rank r is A[zl][y][r*NB + xl'] laid out [zl][y][xl'] */
    uint64_t *pack = use_get ? xch : priv;
    for (size_t r = 0; r < (size_t)np; r++)
      for (size_t zl = 0; zl < NB; zl++)
        for (size_t y = 0; y < N; y++)
          for (size_t xp = 0; xp < NB; xp++)
            pack[r * blk + zl * plane + y * NB + xp] = data[(zl * N + y) * N + r * NB + xp];

    /* 3. all-to-all in one fence epoch */
    MPI_Win_fence(0, win);
    if (!use_get) {
      for (size_t zl = 0; zl < NB; zl++)
        for (int k = 0; k < np; k++) {
          int r = (me + k) % np; /* stagger targets */
          MPI_Put(pack + (size_t)r * blk + zl * plane, (int)plane, MPI_UINT64_T, r,
                  (MPI_Aint)(slab + (size_t)me * blk + zl * plane), (int)plane, MPI_UINT64_T, win);
        }
    } else {
      for (size_t zl = 0; zl < NB; zl++)
        for (int k = 0; k < np; k++) {
          int s = (me + k) % np;
          MPI_Get(priv + (size_t)s * blk + zl * plane, (int)plane, MPI_UINT64_T, s,
                  (MPI_Aint)(slab + (size_t)me * blk + zl * plane), (int)plane, MPI_UINT64_T, win);
        }
    }
    MPI_Win_fence(0, win);

    /* 4. unpack: B[xl'][y][s*NB + zl] = block_from_s[zl][y][xl'] */
    const uint64_t *in = use_get ? priv : xch;
    for (size_t s = 0; s < (size_t)np; s++)
      for (size_t zl = 0; zl < NB; zl++)
        for (size_t y = 0; y < N; y++)
          for (size_t xp = 0; xp < NB; xp++)
            data[(xp * N + y) * N + s * NB + zl] = in[s * blk + zl * plane + y * NB + xp];

    /* 5. digest of every element with its global index */
    uint64_t loc[2] = {0, 0};
    for (size_t xl = 0; xl < NB; xl++)
      for (size_t y = 0; y < N; y++)
        for (size_t z = 0; z < N; z++) {
          uint64_t g = ((x0 + xl) * N + y) * N + z;
          uint64_t h = hash2(data[(xl * N + y) * N + z], g);
          loc[0] ^= h;
          loc[1] += h >> 1;
        }
    report_iter(me, it, loc, &chain);
    sleep_ms(sleepms);
  }
  if (me == 0) {
    printf("done digest %016" PRIx64 "\n", chain);
    fflush(stdout);
  }
  MPI_Win_free(&win);
  free(priv);
  free(line);
  app_timer_report(timing);
  MPI_Finalize();
  return 0;
}
