// MPI Lanczos example: lattice rows distributed in blocks, one ghost row exchanged with each neighbour per
// matrix-vector product, MPI_Allreduce for the dot products. Same options as the serial binary.
#include <mpi.h>

#include <cstdio>

#include "config.h"
#include "mpi_main.h"
#include "revive/checkpoint_mpi.hpp"
#include "run.h"

int main(int argc, char** argv) {
  lanczos::Config c;
  auto parse = [&c](int ac, char** av, int* ny) {
    int code = 0;
    if (!lanczos::ParseArgs(ac, av, "MPI Lanczos eigensolver with application-level checkpoints", &c, &code))
      return code;
    *ny = c.ny;
    return -1;
  };
  return examples::MpiMain(argc, argv, "lanczos_mpi", parse, [&c](int rank, int size) {
    const lanczos::Lattice L = lanczos::Lattice::Block(c.nx, c.ny, rank, size, c.disorder, c.seed);
    lanczos::Parallel P;
    P.sum = [](double x) {
      double out = 0;
      MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      return out;
    };
    P.halo = [rank, size](const lanczos::Lattice& l, const double* x, double* b, double* a, bool* hb, bool* ha) {
      const size_t rows = static_cast<size_t>(l.y1 - l.y0);
      examples::ExchangeGhostRows(x, x + (rows - 1) * l.nx, b, a, l.nx, rank, size, hb, ha);
    };
    revive::mpi::Checkpoint cp(c.name, MPI_COMM_WORLD, lanczos::CheckpointOptions(c));
    lanczos::Run(c, L, P, cp, rank == 0);
  });
}
