// heat2d: 2-D heat diffusion with MPI halo exchange (also runs with one rank) and an application-level
// checkpoint every k steps. Prints the XXH64 of the final global field (gathered on rank 0, row order) and
// its sum, so a restarted run can be compared with an uninterrupted one byte for byte.
//
//   heat2d [--nx 512] [--ny 512] [--steps 2000] [--every 100] [--async off|copy|zero] [--dir D] [--fresh]
//          [--quiet] [--mpiio]
// --mpiio: one shared checkpoint file per version through MPI-IO (Options::mpiio); MPI is then initialised
// with MPI_THREAD_MULTIPLE, which the async modes need for MPI-IO on the writer thread.
#include <mpi.h>
#include <xxhash.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_main.h"
#include "revive/checkpoint_mpi.hpp"
#include "stencil.h"

namespace {

// Row 0 of the padded field is the ghost for y0-1, row rows+1 the ghost for y1; at the grid edges they keep
// the fixed boundary values.
void ExchangeHalo(const heat2d::Block& b, std::vector<double>* u, int rank, int size) {
  const size_t nx = static_cast<size_t>(b.nx), rows = static_cast<size_t>(b.rows());
  double* p = u->data();
  bool has_below, has_above;
  examples::ExchangeGhostRows(p + nx, p + rows * nx, p, p + (rows + 1) * nx, b.nx, rank, size, &has_below,
                              &has_above);
}

struct Args {
  int nx = 512, ny = 512, steps = 2000, every = 100;
  double r = 0.2;
  std::string async = "off", dir, name = "heat2d";
  bool fresh = false;
  bool quiet = false;
  bool mpiio = false;
  std::string levels, local;  // multi-level storage (docs/storage-levels.md); else REVIVE_LEVELS decides
};

void Run(const Args& a, int rank, int size) {
  const heat2d::Block b = heat2d::Split(a.nx, a.ny, rank, size);
  std::vector<double> u, next;
  heat2d::Init(b, &u);
  revive::Options o = revive::Options::from_env();
  if (!a.dir.empty()) o.base_path = a.dir;
  if (a.fresh) o.read_on_restart = false;
  o.async = a.async != "off";
  o.zero_copy = a.async == "zero";
  if (a.mpiio) o.mpiio = true;  // else REVIVE_MPIIO (from_env) decides
  if (!a.levels.empty()) o.levels = a.levels;
  if (!a.local.empty()) o.local_path = a.local;
  revive::mpi::Checkpoint cp(a.name, MPI_COMM_WORLD, o);
  cp.add("u", u);
  cp.commit();
  int64_t step = 1;
  if (cp.restart_if_needed(&step) && rank == 0 && !a.quiet)
    std::fprintf(stderr, "heat2d: restarted after step %lld\n", static_cast<long long>(step - 1));
  for (; step <= a.steps; ++step) {
    if (a.async == "zero") cp.wait();
    ExchangeHalo(b, &u, rank, size);
    heat2d::Step(b, a.r, u, &next);
    u.swap(next);  // vector storage swaps; the checkpoint holds a pointer to `u`, the object, not its data
    cp.update_and_write(step, a.every);
  }
  cp.wait();

  // Gather the interior rows on rank 0 in row order.
  const int mine = b.rows() * b.nx;
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int i = 1; i < size; ++i) displs[i] = displs[i - 1] + counts[i - 1];
  std::vector<double> all(rank == 0 ? static_cast<size_t>(a.nx) * a.ny : 0);
  MPI_Gatherv(u.data() + b.nx, mine, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0,
              MPI_COMM_WORLD);
  if (rank == 0) {
    double sum = 0;
    for (double x : all) sum += x;
    std::printf("heat2d: %dx%d grid, %d steps, r=%g\n", a.nx, a.ny, a.steps, a.r);
    std::printf("checksum = %016llx\nsum = %.17g\n",
                static_cast<unsigned long long>(XXH64(all.data(), all.size() * sizeof(double), 0)), sum);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  auto parse = [&a](int ac, char** av, int* ny) {
    CLI::App app{"2-D heat diffusion with MPI halo exchange and application-level checkpoints"};
    // Scripts append overrides to a base command line: the last occurrence of an option wins.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("--nx", a.nx, "grid width")->check(CLI::Range(3, 1 << 20));
    app.add_option("--ny", a.ny, "grid height")->check(CLI::PositiveNumber);
    app.add_option("--steps", a.steps, "time steps")->check(CLI::PositiveNumber);
    app.add_option("--every", a.every, "checkpoint every k steps (0 = never)")->check(CLI::NonNegativeNumber);
    app.add_option("--r", a.r, "diffusion number (stable for <= 0.25)")->check(CLI::Range(0.0, 0.25));
    app.add_option("--async", a.async, "off, copy, zero")->check(CLI::IsMember({"off", "copy", "zero"}));
    app.add_option("--dir", a.dir, "checkpoint base directory");
    app.add_option("--name", a.name, "checkpoint name");
    app.add_flag("--fresh", a.fresh, "ignore existing checkpoints");
    app.add_flag("--quiet", a.quiet, "no progress messages on stderr");
    app.add_flag("--mpiio", a.mpiio, "one shared checkpoint file per version (MPI-IO)");
    app.add_option("--levels", a.levels, "multi-level storage policy, e.g. L1+L3,L4@10 (docs/storage-levels.md)");
    app.add_option("--local", a.local, "node-local storage root for --levels (default /dev/shm/revive-<uid>)");
    try {
      app.parse(ac, av);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
    *ny = a.ny;
    return -1;
  };
  // The thread level is chosen before MPI_Init_thread, so before the options are parsed: look for the flag.
  bool mpiio = false;
  for (int i = 1; i < argc; ++i) mpiio = mpiio || std::string(argv[i]) == "--mpiio";
  return examples::MpiMain(argc, argv, "heat2d", parse, [&a](int rank, int size) { Run(a, rank, size); },
                           mpiio ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED);
}
