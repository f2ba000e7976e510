/* coll ITERS SLEEP_US: collectives, communicators and groups under checkpoint/restart (issue 7).
 * Per iteration: barrier, bcast, reduce, allreduce with two user-defined ops (a commutative one and a
 * non-commutative one, 2x2 matrix product mod 2^64, which MPI must apply in rank order), alltoall,
 * alltoallv, gather(v), scatter(v), allgather(v); the nonblocking Ibarrier, Ibcast, Iallreduce, Ialltoall,
 * Igather, Iallgather posted together and completed after a sleep (a checkpoint then lands inside them);
 * one rank (changing every iteration) enters late, so the others wait inside the collective meanwhile;
 * Comm_dup/Comm_free every iteration, Comm_split (parity, reversed keys), Comm_create from Group_incl
 * (the even ranks) and group queries. Everything is integer arithmetic, so the results do not depend on
 * the MPI's reduction algorithms. Rank 0 prints one digest line per iteration. */
#include "common.h"

typedef struct { uint64_t a, b, c, d; } mat_t; /* [[a b][c d]] */

static void matmul_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  mat_t *x = in, *y = inout; /* inout = in * inout (in precedes inout in rank order) */
  for (int i = 0; i < *len; i++) {
    mat_t r = {x[i].a * y[i].a + x[i].b * y[i].c, x[i].a * y[i].b + x[i].b * y[i].d,
               x[i].c * y[i].a + x[i].d * y[i].c, x[i].c * y[i].b + x[i].d * y[i].d};
    y[i] = r;
  }
}
static void mixsum_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  uint64_t *x = in, *y = inout;
  for (int i = 0; i < *len; i++) y[i] += x[i]; /* a sum, as a user-defined commutative op */
}
static void xormax_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  uint64_t *x = in, *y = inout;
  for (int i = 0; i < *len; i++) y[i] = (i % 2) ? (x[i] > y[i] ? x[i] : y[i]) : (x[i] ^ y[i]);
}

/* A few collectives on comm, folded into h. */
static uint64_t on_comm(MPI_Comm comm, long it, uint64_t h, MPI_Op xm) {
  int r, n;
  MPI_Comm_rank(comm, &r);
  MPI_Comm_size(comm, &n);
  uint64_t v[4] = {val3(r, it, 1), val3(r, it, 2), val3(r, it, 3), val3(r, it, 4)}, s[4];
  MPI_Allreduce(v, s, 4, MPI_UINT64_T, xm, comm);
  h = fnv(h, s, sizeof s);
  uint64_t b = r == n - 1 ? val3(n, it, 5) : 0;
  MPI_Bcast(&b, 1, MPI_UINT64_T, n - 1, comm);
  CHECK(b == val3(n, it, 5), "bcast on a sub-communicator");
  return fnv64(fnv64(h, b), (uint64_t)n * 1000 + r);
}

int main(int argc, char **argv) {
  int rank, size;
  start(&argc, &argv, &rank, &size);
  long iters = arg_long(argc, argv, 1, 40), sleep_us = arg_long(argc, argv, 2, 100000);

  MPI_Datatype mat;
  MPI_Type_contiguous(4, MPI_UINT64_T, &mat);
  MPI_Type_commit(&mat);
  MPI_Op matmul, mixsum, xormax;
  MPI_Op_create(matmul_op, 0, &matmul);
  MPI_Op_create(mixsum_op, 1, &mixsum);
  MPI_Op_create(xormax_op, 1, &xormax);

  /* Created once: split by parity with reversed keys, and the even ranks' communicator from a group. */
  MPI_Comm split, evens;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);
  MPI_Group world_g, even_g;
  MPI_Comm_group(MPI_COMM_WORLD, &world_g);
  int ne = (size + 1) / 2, *er = malloc(sizeof(int) * ne);
  for (int k = 0; k < ne; k++) er[k] = 2 * k;
  MPI_Group_incl(world_g, ne, er, &even_g);
  MPI_Comm_create(MPI_COMM_WORLD, even_g, &evens);
  CHECK((rank % 2 == 0) == (evens != MPI_COMM_NULL), "Comm_create membership");

  const int A = 16; /* elements per peer in alltoall/gather */
  uint64_t *sb = malloc(8 * A * size), *rb = malloc(8 * A * size), *big = malloc(8 * A * size * size);
  int *scnt = malloc(sizeof(int) * size), *sdis = malloc(sizeof(int) * size);
  int *rcnt = malloc(sizeof(int) * size), *rdis = malloc(sizeof(int) * size);
  uint64_t *nsb = malloc(8 * A * size), *nrb = malloc(8 * A * size), *ngb = malloc(8 * A * size);
  uint64_t total = FNV0;

  for (long it = 0; it < iters; it++) {
    uint64_t h = fnv64(FNV0, it);
    const int late = (int)(it % size); /* this rank enters the collectives late */

    /* Nonblocking collectives, posted together and completed after the sleep. */
    MPI_Request nb[6];
    uint64_t nbc = rank == late ? val3(late, it, 10) : 0, nv[3] = {val3(rank, it, 11), (uint64_t)rank, 1}, ns[3];
    for (int k = 0; k < A * size; k++) nsb[k] = val3(rank, it, 100 + k);
    MPI_Ibarrier(MPI_COMM_WORLD, &nb[0]);
    MPI_Ibcast(&nbc, 1, MPI_UINT64_T, late, MPI_COMM_WORLD, &nb[1]);
    MPI_Iallreduce(nv, ns, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &nb[2]);
    MPI_Ialltoall(nsb, A, MPI_UINT64_T, nrb, A, MPI_UINT64_T, MPI_COMM_WORLD, &nb[3]);
    MPI_Igather(nsb, A, MPI_UINT64_T, ngb, A, MPI_UINT64_T, late, MPI_COMM_WORLD, &nb[4]);
    uint64_t *nag = big;
    MPI_Iallgather(nsb, A, MPI_UINT64_T, nag, A, MPI_UINT64_T, MPI_COMM_WORLD, &nb[5]);
    usleep(sleep_us / 4 + (rank == late ? sleep_us / 4 : 0));
    MPI_Waitall(6, nb, MPI_STATUSES_IGNORE);
    CHECK(nbc == val3(late, it, 10), "Ibcast");
    CHECK(ns[1] == (uint64_t)size * (size - 1) / 2 && ns[2] == (uint64_t)size, "Iallreduce");
    h = fnv64(fnv(h, ns, sizeof ns), nbc);
    for (int p = 0; p < size; p++) CHECK(nrb[A * p] == val3(p, it, 100 + A * rank), "Ialltoall");
    h = fnv(h, nrb, 8 * A * size);
    if (rank == late) {
      for (int p = 0; p < size; p++) CHECK(ngb[A * p + 1] == val3(p, it, 101), "Igather");
      h = fnv(h, ngb, 8 * A * size);
    }
    for (int p = 0; p < size; p++) CHECK(nag[A * p + 2] == val3(p, it, 102), "Iallgather");
    h = fnv(h, nag, 8 * A * size);

    /* Blocking collectives; the late rank sleeps first, the others wait inside the barrier. */
    if (rank == late) usleep(sleep_us / 4);
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t bc[5];
    for (int k = 0; k < 5; k++) bc[k] = rank == late ? val3(late, it, 20 + k) : 0;
    MPI_Bcast(bc, 5, MPI_UINT64_T, late, MPI_COMM_WORLD);
    CHECK(bc[4] == val3(late, it, 24), "Bcast");
    h = fnv(h, bc, sizeof bc);
    uint64_t rv[2] = {val3(rank, it, 30), (uint64_t)rank * it}, rs[2] = {0, 0};
    MPI_Reduce(rv, rs, 2, MPI_UINT64_T, MPI_SUM, late, MPI_COMM_WORLD);
    if (rank == late) h = fnv(h, rs, sizeof rs);
    mat_t m = {1 + val3(rank, it, 40) % 7, val3(rank, it, 41) % 5, val3(rank, it, 42) % 3, 1 + rank}, mp;
    MPI_Allreduce(&m, &mp, 1, mat, matmul, MPI_COMM_WORLD);
    h = fnv(h, &mp, sizeof mp);
    uint64_t us[2] = {val3(rank, it, 43), 1}, ur[2];
    MPI_Allreduce(us, ur, 2, MPI_UINT64_T, mixsum, MPI_COMM_WORLD);
    CHECK(ur[1] == (uint64_t)size, "user-defined sum");
    h = fnv(h, ur, sizeof ur);

    for (int k = 0; k < A * size; k++) sb[k] = val3(rank, it, 200 + k);
    MPI_Alltoall(sb, A, MPI_UINT64_T, rb, A, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < size; p++) CHECK(rb[A * p] == val3(p, it, 200 + A * rank), "Alltoall");
    h = fnv(h, rb, 8 * A * size);
    /* alltoallv: p gets 1 + (rank + p + it) % A elements from rank, packed. */
    int so = 0, ro = 0;
    for (int p = 0; p < size; p++) {
      scnt[p] = 1 + (int)((rank + p + it) % A); sdis[p] = so; so += scnt[p];
      rcnt[p] = 1 + (int)((p + rank + it) % A); rdis[p] = ro; ro += rcnt[p];
    }
    MPI_Alltoallv(sb, scnt, sdis, MPI_UINT64_T, rb, rcnt, rdis, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < size; p++) { /* p's block for us starts at its send displacement for us */
      int off = 0;
      for (int q = 0; q < rank; q++) off += 1 + (int)((p + q + it) % A);
      CHECK(rb[rdis[p]] == val3(p, it, 200 + off), "Alltoallv");
    }
    h = fnv(h, rb, 8 * ro);
    /* gather / gatherv (rank r contributes r % 3 + 1 elements) at the late rank. */
    MPI_Gather(sb, A, MPI_UINT64_T, big, A, MPI_UINT64_T, late, MPI_COMM_WORLD);
    if (rank == late) h = fnv(h, big, 8 * A * size);
    int gn = rank % 3 + 1, go = 0;
    for (int p = 0; p < size; p++) { rcnt[p] = p % 3 + 1; rdis[p] = go; go += rcnt[p] + 1; }
    MPI_Gatherv(sb, gn, MPI_UINT64_T, big, rcnt, rdis, MPI_UINT64_T, late, MPI_COMM_WORLD);
    if (rank == late)
      for (int p = 0; p < size; p++) {
        CHECK(big[rdis[p]] == val3(p, it, 200), "Gatherv");
        h = fnv(h, big + rdis[p], 8 * rcnt[p]);
      }
    /* scatter / scatterv from the late rank. */
    for (int k = 0; k < A * size; k++) big[k] = val3(late, it, 300 + k);
    MPI_Scatter(big, A, MPI_UINT64_T, rb, A, MPI_UINT64_T, late, MPI_COMM_WORLD);
    CHECK(rb[0] == val3(late, it, 300 + A * rank), "Scatter");
    h = fnv(h, rb, 8 * A);
    for (int p = 0; p < size; p++) { scnt[p] = 1 + (p + (int)it) % A; sdis[p] = A * p; }
    MPI_Scatterv(big, scnt, sdis, MPI_UINT64_T, rb, scnt[rank], MPI_UINT64_T, late, MPI_COMM_WORLD);
    CHECK(rb[scnt[rank] - 1] == val3(late, it, 300 + A * rank + scnt[rank] - 1), "Scatterv");
    h = fnv(h, rb, 8 * scnt[rank]);
    /* allgather / allgatherv. */
    MPI_Allgather(sb, 2, MPI_UINT64_T, rb, 2, MPI_UINT64_T, MPI_COMM_WORLD);
    h = fnv(h, rb, 16 * size);
    go = 0;
    for (int p = 0; p < size; p++) { rcnt[p] = 1 + p % 2; rdis[p] = go; go += rcnt[p]; }
    MPI_Allgatherv(sb, 1 + rank % 2, MPI_UINT64_T, rb, rcnt, rdis, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < size; p++) CHECK(rb[rdis[p]] == val3(p, it, 200), "Allgatherv");
    h = fnv(h, rb, 8 * go);

    /* Communicators: a fresh dup every iteration, the split and the group-made ones. */
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    if (rank == late) usleep(sleep_us / 8);
    h = on_comm(d, it, h, xormax);
    MPI_Comm_free(&d);
    h = on_comm(split, it, h, xormax);
    if (evens != MPI_COMM_NULL) h = on_comm(evens, it, h, mixsum);
    int gs, grk, cmp;
    MPI_Group sg;
    MPI_Comm_group(split, &sg);
    MPI_Group_size(sg, &gs);
    MPI_Group_rank(sg, &grk);
    MPI_Group_compare(sg, even_g, &cmp);
    MPI_Group_free(&sg);
    h = fnv64(h, (uint64_t)gs * 100 + grk * 10 + (cmp == MPI_IDENT));

    usleep(sleep_us / 4);
    total = fnv64(total, report(MPI_COMM_WORLD, "coll", it, h));
  }
  if (evens != MPI_COMM_NULL) MPI_Comm_free(&evens);
  MPI_Comm_free(&split);
  MPI_Group_free(&even_g);
  MPI_Group_free(&world_g);
  MPI_Op_free(&matmul);
  MPI_Op_free(&mixsum);
  MPI_Op_free(&xormax);
  MPI_Type_free(&mat);
  report_end(MPI_COMM_WORLD, "coll", iters, total);
  finish();
  return 0;
}
