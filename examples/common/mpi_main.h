// MPI skeleton shared by the row-distributed examples (lanczos_mpi, heat2d): start-up, ghost rows, errors.
#ifndef REVIVE_EXAMPLES_COMMON_MPI_MAIN_H_
#define REVIVE_EXAMPLES_COMMON_MPI_MAIN_H_

#include <mpi.h>

#include <cstdio>

#include "revive/checkpoint.hpp"

namespace examples {

// Ghost-row exchange: my last owned row goes to the rank above (it arrives there as `below`), my first
// owned row to the rank below (arriving as `above`). At the grid edges MPI_PROC_NULL leaves the receive
// buffers untouched. Returns whether each neighbour exists.
inline void ExchangeGhostRows(const double* first, const double* last, double* below, double* above, int nx,
                              int rank, int size, bool* has_below, bool* has_above) {
  const int down = rank > 0 ? rank - 1 : MPI_PROC_NULL, up = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
  MPI_Sendrecv(last, nx, MPI_DOUBLE, up, 1, below, nx, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Sendrecv(first, nx, MPI_DOUBLE, down, 2, above, nx, MPI_DOUBLE, up, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  *has_below = down != MPI_PROC_NULL;
  *has_above = up != MPI_PROC_NULL;
}

// The main() of an example: MPI_Init_thread (FUNNELED: the library's writer thread never calls MPI, except
// in shared-file mode with async writing, for which a caller passes MPI_THREAD_MULTIPLE as thread_level),
// parse(argc, argv, &ny) returns -1 to go on or the exit code (help, bad option); every rank needs at
// least one of the ny rows; body(rank, size) runs. A revive::Error is printed with the rank and aborts
// the job, because the other ranks may be waiting in a collective.
template <class Parse, class Body>
int MpiMain(int argc, char** argv, const char* prog, Parse parse, Body body, int thread_level = MPI_THREAD_FUNNELED) {
  int provided = 0, rank = 0, size = 1, ny = 0;
  MPI_Init_thread(&argc, &argv, thread_level, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = parse(argc, argv, &ny);
  if (code < 0 && ny < size) {
    if (rank == 0) std::fprintf(stderr, "%s: --ny %d is smaller than the %d ranks\n", prog, ny, size);
    code = 2;
  }
  if (code < 0) {
    try {
      body(rank, size);
      code = 0;
    } catch (const revive::Error& e) {
      std::fprintf(stderr, "%s rank %d: %s\n", prog, rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return code;
}

}  // namespace examples

#endif
