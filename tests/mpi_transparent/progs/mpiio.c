/* mpiio ITERS SLEEP_US DIR: MPI-IO under checkpoint/restart (issue 7). One file, DIR/mpiio.dat, opened
 * once by all ranks and kept open across the iterations (so every checkpoint finds it open). Per
 * iteration: each rank writes its block of slot it % SLOTS with MPI_File_write_at_all (explicit offsets),
 * then, through a strided view (MPI_File_set_view with a vector filetype: each rank sees every size-th
 * int of the slot), writes its ints with MPI_File_write_all into the slot's second half; after a sleep,
 * all read back their neighbour's block with MPI_File_read_at_all and the interleaved half through the
 * view with MPI_File_read_at_all, and rank 0 reads the whole file with MPI_File_read_at. The digest covers
 * the contents read back. */
#include "common.h"

enum { B = 1024, SLOTS = 5 }; /* ints per rank per half-slot */

int main(int argc, char **argv) {
  int rank, size;
  start(&argc, &argv, &rank, &size);
  long iters = arg_long(argc, argv, 1, 40), sleep_us = arg_long(argc, argv, 2, 100000);
  const char *dir = argc > 3 ? argv[3] : ".";
  char path[4096];
  snprintf(path, sizeof path, "%s/mpiio.dat", dir);
  if (rank == 0) MPI_File_delete(path, MPI_INFO_NULL); /* a file of an earlier run: absent is fine */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File f;
  int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &f);
  CHECK(rc == MPI_SUCCESS, "MPI_File_open");
  const MPI_Offset half = (MPI_Offset)B * size * 4, slot = 2 * half; /* bytes */
  MPI_Datatype strided; /* within a half: int k of rank r at index k*size + r */
  MPI_Type_vector(B, 1, size, MPI_INT32_T, &strided);
  MPI_Datatype filetype;
  MPI_Type_create_resized(strided, 0, half, &filetype);
  MPI_Type_commit(&filetype);
  int32_t *blk = malloc(4 * B), *in = malloc(4 * B), *all = malloc(slot * SLOTS);
  uint64_t total = FNV0;
  for (long it = 0; it < iters; it++) {
    const MPI_Offset base = slot * (it % SLOTS);
    uint64_t h = fnv64(FNV0, it);
    for (int k = 0; k < B; k++) blk[k] = (int32_t)val3(rank, it, k);
    MPI_File_set_view(f, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    CHECK(MPI_File_write_at_all(f, base + (MPI_Offset)rank * B * 4, blk, B, MPI_INT32_T, MPI_STATUS_IGNORE) ==
          MPI_SUCCESS, "write_at_all");
    for (int k = 0; k < B; k++) blk[k] = (int32_t)val3(rank, it, B + k);
    MPI_File_set_view(f, base + half + 4 * rank, MPI_INT32_T, filetype, "native", MPI_INFO_NULL);
    CHECK(MPI_File_write_all(f, blk, B, MPI_INT32_T, MPI_STATUS_IGNORE) == MPI_SUCCESS, "write_all through a view");
    MPI_File_sync(f);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_sync(f);
    usleep(sleep_us / 2);
    /* Read back: the right neighbour's interleaved ints through its view, then its plain block. */
    const int right = (rank + 1) % size;
    MPI_File_set_view(f, base + half + 4 * right, MPI_INT32_T, filetype, "native", MPI_INFO_NULL);
    CHECK(MPI_File_read_at_all(f, 0, in, B, MPI_INT32_T, MPI_STATUS_IGNORE) == MPI_SUCCESS, "read_at_all (view)");
    for (int k = 0; k < B; k++) CHECK(in[k] == (int32_t)val3(right, it, B + k), "strided contents read back");
    h = fnv(h, in, 4 * B);
    MPI_File_set_view(f, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    CHECK(MPI_File_read_at_all(f, base + (MPI_Offset)right * B * 4, in, B, MPI_INT32_T, MPI_STATUS_IGNORE) ==
          MPI_SUCCESS, "read_at_all");
    for (int k = 0; k < B; k++) CHECK(in[k] == (int32_t)val3(right, it, k), "contents read back");
    h = fnv(h, in, 4 * B);
    if (rank == 0) { /* the whole file as it is now (slots not yet written read as zeros) */
      MPI_Offset sz;
      MPI_File_get_size(f, &sz);
      CHECK(sz == slot * (it + 1 < SLOTS ? it + 1 : SLOTS), "file size");
      MPI_Status st;
      CHECK(MPI_File_read_at(f, 0, all, (int)sz, MPI_BYTE, &st) == MPI_SUCCESS, "read_at");
      int cnt;
      MPI_Get_count(&st, MPI_BYTE, &cnt);
      CHECK(cnt == sz, "short read");
      h = fnv(h, all, sz);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* nobody overwrites the slot rank 0 reads */
    usleep(sleep_us / 2);
    total = fnv64(total, report(MPI_COMM_WORLD, "mpiio", it, h));
  }
  MPI_File_close(&f);
  MPI_Type_free(&filetype);
  MPI_Type_free(&strided);
  report_end(MPI_COMM_WORLD, "mpiio", iters, total);
  finish();
  return 0;
}
