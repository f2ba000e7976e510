/* p2p ITERS SLEEP_US BIG_INTS: point-to-point consistency under checkpoint/restart (issue 7).
 * Per iteration, every pattern of the issue, each feeding the rank's digest:
 *  - ring exchange with Isend/Irecv/Waitall;
 *  - all-to-all messages completed with Waitany (half) and Testsome (the rest), each into its source's slot;
 *  - every rank sends rank 0 a message of varying size and tag; rank 0 takes them with Probe+Recv from
 *    ANY_SOURCE/ANY_TAG and with an Iprobe loop, combined by a commutative sum;
 *  - Sendrecv with a shift that changes per iteration, Ssend between pairs;
 *  - persistent requests (Send_init/Recv_init, created once, Startall/Waitall each iteration);
 *  - derived datatypes: a column (vector), a struct, an indexed type;
 *  - a large message in flight across iterations: Isend/Irecv of BIG_INTS ints posted in iteration i,
 *    completed in iteration i+1 after the sleep (so a checkpoint during the sleep finds it unfinished).
 * Rank 0 prints one digest line per iteration. */
#include "common.h"

enum { RING_N = 1000, A2A_N = 64, TAG_ANY_BASE = 100, PERS_N = 500, ROWS = 16, COLS = 12 };
typedef struct { int32_t i; double d; char s[8]; int64_t l; } rec_t;

int main(int argc, char **argv) {
  int rank, size;
  start(&argc, &argv, &rank, &size);
  long iters = arg_long(argc, argv, 1, 40), sleep_us = arg_long(argc, argv, 2, 100000);
  long big = arg_long(argc, argv, 3, 1 << 18);
  CHECK(size >= 2, "p2p needs at least 2 ranks");
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;

  /* Derived datatypes: a column of a ROWSxCOLS int matrix, the struct, every third int of 3*ROWS. */
  MPI_Datatype column, rec, idx;
  MPI_Type_vector(ROWS, 1, COLS, MPI_INT32_T, &column);
  MPI_Type_commit(&column);
  {
    int bl[4] = {1, 1, 8, 1};
    MPI_Aint disp[4] = {offsetof(rec_t, i), offsetof(rec_t, d), offsetof(rec_t, s), offsetof(rec_t, l)};
    MPI_Datatype ty[4] = {MPI_INT32_T, MPI_DOUBLE, MPI_CHAR, MPI_INT64_T};
    MPI_Datatype tmp;
    MPI_Type_create_struct(4, bl, disp, ty, &tmp);
    MPI_Type_create_resized(tmp, 0, sizeof(rec_t), &rec);
    MPI_Type_free(&tmp);
    MPI_Type_commit(&rec);
    int ibl[ROWS], idisp[ROWS];
    for (int k = 0; k < ROWS; k++) { ibl[k] = 1 + k % 2; idisp[k] = 3 * k; }
    MPI_Type_indexed(ROWS, ibl, idisp, MPI_INT32_T, &idx);
    MPI_Type_commit(&idx);
  }

  /* Persistent requests: send to the right, receive from the left, every iteration. */
  int64_t *pers_out = malloc(sizeof(int64_t) * PERS_N), *pers_in = malloc(sizeof(int64_t) * PERS_N);
  MPI_Request pers[2];
  MPI_Send_init(pers_out, PERS_N, MPI_INT64_T, right, 7, MPI_COMM_WORLD, &pers[0]);
  MPI_Recv_init(pers_in, PERS_N, MPI_INT64_T, left, 7, MPI_COMM_WORLD, &pers[1]);

  uint64_t *ring_out = malloc(8 * RING_N), *ring_in = malloc(8 * RING_N);
  uint64_t *a2a_out = malloc(8 * A2A_N * size), *a2a_in = malloc(8 * A2A_N * size);
  uint64_t *any = malloc(8 * (64 + size));
  int32_t *big_out[2] = {malloc(4 * big), malloc(4 * big)}, *big_in[2] = {malloc(4 * big), malloc(4 * big)};
  MPI_Request big_req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * size);
  int *idxs = malloc(sizeof(int) * 2 * size);
  /* The ANY_SOURCE/ANY_TAG messages on a communicator of their own: on the world, a wildcard receive
   * would also match the next phase's messages of a rank that is ahead. */
  MPI_Comm anyc;
  MPI_Comm_dup(MPI_COMM_WORLD, &anyc);
  uint64_t total = FNV0;

  for (long it = 0; it < iters; it++) {
    uint64_t h = fnv64(FNV0, it);
    /* The big message of the previous iteration has been in flight during its sleep: finish it. */
    if (it > 0) {
      MPI_Waitall(2, big_req, MPI_STATUSES_IGNORE);
      int32_t *in = big_in[(it - 1) % 2];
      for (long k = 0; k < big; k += 97) CHECK(in[k] == (int32_t)val3(left, it - 1, k), "big message content");
      h = fnv(h, in, 4 * big);
    }
    /* ... and post this iteration's, completed in the next one (the last one at once). */
    {
      int32_t *out = big_out[it % 2];
      for (long k = 0; k < big; k++) out[k] = (int32_t)val3(rank, it, k);
      MPI_Irecv(big_in[it % 2], big, MPI_INT32_T, left, 3, MPI_COMM_WORLD, &big_req[0]);
      MPI_Isend(out, big, MPI_INT32_T, right, 3, MPI_COMM_WORLD, &big_req[1]);
    }

    /* Ring with Isend/Irecv/Waitall. */
    for (int k = 0; k < RING_N; k++) ring_out[k] = val3(rank, it, k);
    MPI_Request rr[2];
    MPI_Irecv(ring_in, RING_N, MPI_UINT64_T, left, 1, MPI_COMM_WORLD, &rr[0]);
    MPI_Isend(ring_out, RING_N, MPI_UINT64_T, right, 1, MPI_COMM_WORLD, &rr[1]);
    usleep(sleep_us / 4); /* messages in flight */
    MPI_Waitall(2, rr, MPI_STATUSES_IGNORE);
    CHECK(ring_in[RING_N - 1] == val3(left, it, RING_N - 1), "ring content");
    h = fnv(h, ring_in, 8 * RING_N);

    /* All-to-all by hand: Waitany for the first half of the completions, Testsome for the rest. */
    int nreq = 0;
    for (int p = 0; p < size; p++) {
      if (p == rank) continue;
      MPI_Irecv(a2a_in + A2A_N * p, A2A_N, MPI_UINT64_T, p, 2, MPI_COMM_WORLD, &reqs[nreq++]);
    }
    for (int p = 0; p < size; p++) {
      if (p == rank) continue;
      for (int k = 0; k < A2A_N; k++) a2a_out[A2A_N * p + k] = val3(rank * 131 + p, it, k);
      MPI_Isend(a2a_out + A2A_N * p, A2A_N, MPI_UINT64_T, p, 2, MPI_COMM_WORLD, &reqs[nreq++]);
    }
    int left_to_do = nreq;
    for (int k = 0; k < nreq / 2; k++) {
      int which;
      MPI_Waitany(nreq, reqs, &which, MPI_STATUS_IGNORE);
      left_to_do--;
    }
    while (left_to_do > 0) {
      int outc;
      MPI_Testsome(nreq, reqs, &outc, idxs, MPI_STATUSES_IGNORE);
      if (outc == MPI_UNDEFINED) break;
      left_to_do -= outc;
      if (outc == 0) usleep(100);
    }
    CHECK(left_to_do == 0, "Testsome left requests");
    for (int p = 0; p < size; p++)
      if (p != rank) {
        CHECK(a2a_in[A2A_N * p] == val3(p * 131 + rank, it, 0), "all-to-all content");
        h = fnv(h, a2a_in + A2A_N * p, 8 * A2A_N);
      }

    /* To rank 0 from everyone, ANY_SOURCE/ANY_TAG: sizes and tags vary; Probe+Recv for half, Iprobe for
     * the rest; the contents are summed (commutative), so the arrival order does not matter. */
    {
      int n = 1 + (int)((it + rank) % 64), tag = TAG_ANY_BASE + (int)((it * 7 + rank) % 13);
      for (int k = 0; k < n; k++) any[k] = val3(rank, it, 1000 + k);
      if (rank != 0) {
        if (rank % 2) usleep(sleep_us / 8); /* the senders arrive at different times */
        MPI_Send(any, n, MPI_UINT64_T, 0, tag, anyc);
      } else {
        uint64_t sum = 0;
        for (int got = 0; got < size - 1; got++) {
          MPI_Status st;
          if (got % 2 == 0) {
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, anyc, &st);
          } else {
            int flag = 0;
            while (!flag) {
              MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, anyc, &flag, &st);
              if (!flag) usleep(200);
            }
          }
          int cnt;
          MPI_Get_count(&st, MPI_UINT64_T, &cnt);
          int src = st.MPI_SOURCE, tg = st.MPI_TAG;
          CHECK(tg >= TAG_ANY_BASE && tg < TAG_ANY_BASE + 13, "ANY_TAG: tag out of range");
          CHECK(cnt == 1 + (int)((it + src) % 64), "probed count");
          CHECK(tg == TAG_ANY_BASE + (int)((it * 7 + src) % 13), "probed tag");
          MPI_Recv(any, cnt, MPI_UINT64_T, src, tg, anyc, MPI_STATUS_IGNORE);
          uint64_t x = mix64((uint64_t)src << 32 | (uint64_t)tg);
          for (int k = 0; k < cnt; k++) {
            CHECK(any[k] == val3(src, it, 1000 + k), "ANY_SOURCE content");
            x = fnv64(x, any[k]);
          }
          sum += x;
        }
        h = fnv64(h, sum);
      }
    }

    /* Sendrecv with a shift that changes every iteration. */
    {
      int shift = 1 + (int)(it % (size - 1));
      uint64_t o[8], in[8];
      for (int k = 0; k < 8; k++) o[k] = val3(rank, it, 2000 + k);
      MPI_Sendrecv(o, 8, MPI_UINT64_T, (rank + shift) % size, 4, in, 8, MPI_UINT64_T, (rank - shift + size) % size, 4,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(in[7] == val3((rank - shift + size) % size, it, 2007), "Sendrecv content");
      h = fnv(h, in, sizeof in);
    }
    /* Ssend: even ranks to the next odd one (a lone last even rank sits out). */
    {
      uint64_t v = val3(rank, it, 3000);
      if (rank % 2 == 0 && rank + 1 < size) {
        usleep(sleep_us / 8); /* the receiver waits inside Recv meanwhile */
        MPI_Ssend(&v, 1, MPI_UINT64_T, rank + 1, 5, MPI_COMM_WORLD);
      } else if (rank % 2 == 1) {
        MPI_Recv(&v, 1, MPI_UINT64_T, rank - 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == val3(rank - 1, it, 3000), "Ssend content");
        h = fnv64(h, v);
      }
    }
    /* Persistent requests. */
    for (int k = 0; k < PERS_N; k++) pers_out[k] = (int64_t)val3(rank, it, 4000 + k);
    MPI_Startall(2, pers);
    usleep(sleep_us / 8);
    MPI_Waitall(2, pers, MPI_STATUSES_IGNORE);
    CHECK(pers_in[0] == (int64_t)val3(left, it, 4000), "persistent content");
    h = fnv(h, pers_in, 8 * PERS_N);

    /* Derived datatypes: column `it % COLS` of the matrix to the right, received contiguous; records
     * with the struct type; the indexed type both ways. */
    {
      int32_t m[ROWS * COLS], col[ROWS];
      for (int k = 0; k < ROWS * COLS; k++) m[k] = (int32_t)val3(rank, it, 5000 + k);
      int c = (int)(it % COLS);
      MPI_Sendrecv(m + c, 1, column, right, 6, col, ROWS, MPI_INT32_T, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int k = 0; k < ROWS; k++) CHECK(col[k] == (int32_t)val3(left, it, 5000 + k * COLS + c), "vector type");
      h = fnv(h, col, sizeof col);
      rec_t ro[3], ri[3];
      memset(ro, 0, sizeof ro);
      memset(ri, 0, sizeof ri);
      for (int k = 0; k < 3; k++) {
        ro[k].i = rank * 10 + k;
        ro[k].d = (double)it + k / 4.0;
        snprintf(ro[k].s, sizeof ro[k].s, "r%d.%d", rank % 100, k);
        ro[k].l = (int64_t)val3(rank, it, 6000 + k);
      }
      MPI_Sendrecv(ro, 3, rec, right, 8, ri, 3, rec, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int k = 0; k < 3; k++) {
        CHECK(ri[k].i == left * 10 + k && ri[k].d == (double)it + k / 4.0 &&
              ri[k].l == (int64_t)val3(left, it, 6000 + k), "struct type");
        h = fnv64(h, (uint64_t)ri[k].i);
        h = fnv(h, &ri[k].d, 8);
        h = fnv(h, ri[k].s, 8);
        h = fnv64(h, (uint64_t)ri[k].l);
      }
      int32_t io[3 * ROWS + 1], ii[3 * ROWS + 1];
      for (int k = 0; k <= 3 * ROWS; k++) { io[k] = (int32_t)val3(rank, it, 7000 + k); ii[k] = -1; }
      MPI_Sendrecv(io, 1, idx, right, 9, ii, 1, idx, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int k = 0; k < ROWS; k++) {
        CHECK(ii[3 * k] == (int32_t)val3(left, it, 7000 + 3 * k), "indexed type");
        CHECK(ii[3 * k + 2] == -1, "indexed type wrote a gap");
      }
      h = fnv(h, ii, sizeof ii);
    }

    usleep(sleep_us / 2); /* the big message is in flight */
    total = fnv64(total, report(MPI_COMM_WORLD, "p2p", it, h));
  }
  MPI_Waitall(2, big_req, MPI_STATUSES_IGNORE);
  CHECK(big_in[(iters - 1) % 2][0] == (int32_t)val3(left, iters - 1, 0) || iters == 0, "last big message");
  MPI_Request_free(&pers[0]);
  MPI_Request_free(&pers[1]);
  MPI_Comm_free(&anyc);
  MPI_Type_free(&column);
  MPI_Type_free(&rec);
  MPI_Type_free(&idx);
  report_end(MPI_COMM_WORLD, "p2p", iters, total);
  finish();
  return 0;
}
