// mpi_interval_test DIR ITERATIONS: ranks iterating at different speeds (rank r sleeps 1 + r ms per
// iteration, no communication between writes) call update_and_write(it, 10) under REVIVE_CP_INTERVAL (set by
// the caller, with REVIVE_HEARTBEAT_DIR). The interval's decision must be the same on every rank without a
// collective per iteration: a rank that decided otherwise would hang the others in the write. At the end
// every rank's list of written iterations and its version are compared with rank 0's; prints PASS.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "revive/checkpoint_mpi.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_interval_test DIR ITERATIONS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  revive::Options o = revive::Options::from_env();
  o.base_path = argv[1];
  o.read_on_restart = false;
  const int64_t n = std::atoll(argv[2]);
  int ok = 1;
  std::vector<int64_t> wrote;
  uint64_t version = 0;
  try {
    std::vector<double> x(1000, rank);
    revive::mpi::Checkpoint cp("interval", MPI_COMM_WORLD, o);
    cp.add("x", x);
    cp.commit();
    if (!(o.interval > 0 || o.interval_auto)) throw revive::Error("REVIVE_CP_INTERVAL is not set");
    for (int64_t it = 0; it < n; ++it) {
      usleep(1000 * (1 + rank));
      x[0] = static_cast<double>(it);
      if (cp.update_and_write(it, 10)) wrote.push_back(it);
    }
    cp.wait();
    version = cp.version();
    // Some writes must have been chosen by time: the interval replaced `every` after the bootstrap.
    if (cp.interval_state().next_iteration < 0) throw revive::Error("no write was measured");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Rank 0's list to everyone, each rank compares.
  long long count = static_cast<long long>(wrote.size());
  MPI_Bcast(&count, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  std::vector<int64_t> ref(wrote);
  ref.resize(count);
  MPI_Bcast(ref.data(), static_cast<int>(count), MPI_INT64_T, 0, MPI_COMM_WORLD);
  unsigned long long v0 = version;
  MPI_Bcast(&v0, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  if (ref != wrote || v0 != version || version != wrote.size()) {
    std::fprintf(stderr, "rank %d: wrote %zu versions (version %llu), rank 0 %lld (version %llu)\n", rank,
                 wrote.size(), static_cast<unsigned long long>(version), count, v0);
    ok = 0;
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    std::string list;
    for (int64_t w : wrote) list += " " + std::to_string(w);
    std::printf("wrote at iterations%s\n%s\n", list.c_str(), all ? "interval: PASS" : "interval: FAIL");
  }
  MPI_Finalize();
  return all ? 0 : 1;
}
