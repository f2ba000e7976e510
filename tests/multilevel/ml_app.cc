// ml_app: an MPI program checkpointing with multi-level storage (REVIVE_LEVELS & co. from the environment).
//   ml_app STEPS EVERY [DIE_AT]
// Each rank evolves a vector whose length depends on its rank (so group members' pieces differ in size),
// checkpoints every EVERY steps, and at the end rank 0 prints every rank's XXH-free digest (FNV-1a) and the
// step each rank restarted from. With DIE_AT, every rank SIGKILLs itself right after the checkpoint of that
// step: the job dies as a whole, as when a node fails and the batch system ends the job.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "revive/checkpoint_mpi.hpp"

static uint64_t Fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) {
    if (rank == 0) std::fprintf(stderr, "usage: ml_app STEPS EVERY [DIE_AT]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int64_t steps = std::atoll(argv[1]), every = std::atoll(argv[2]);
  const int64_t die_at = argc > 3 ? std::atoll(argv[3]) : -1;
  // ML_APP_BIG=E: E more elements per rank (larger checkpoints: benchmarks, kills during long writes).
  const char* big = std::getenv("ML_APP_BIG");
  const size_t n = 1000 + 7919 * static_cast<size_t>(rank) + (big ? std::strtoull(big, nullptr, 10) : 0);
  std::vector<uint64_t> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = i * 2654435761u + static_cast<uint64_t>(rank);
  std::string note = "rank " + std::to_string(rank);
  int64_t it = 0;
  int64_t started = 0;
  try {
    revive::mpi::Checkpoint cp("mlapp", MPI_COMM_WORLD);
    cp.add("x", x);
    cp.add("note", note);
    cp.commit();
    cp.restart_if_needed(&it);
    started = it;
    for (; it <= steps; ++it) {
      for (size_t i = 0; i < n; ++i) x[i] = x[i] * 6364136223846793005ull + 1442695040888963407ull + static_cast<uint64_t>(it);
      note = "rank " + std::to_string(rank) + " step " + std::to_string(it);
      cp.update_and_write(it, every);
      if (it == die_at) {
        // ML_APP_WAIT_GLOBAL=N: first wait (up to 60 s) until version N is complete on the global level, so
        // a test can rely on the background flush having finished (a real program computes meanwhile).
        if (const char* w = std::getenv("ML_APP_WAIT_GLOBAL")) {
          const std::string man = std::string(std::getenv("REVIVE_CP_PATH")) + "/mlapp/v-" + w + "/MANIFEST";
          for (int i = 0; i < 6000 && access(man.c_str(), F_OK) != 0; ++i) usleep(10000);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        raise(SIGKILL);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ml_app rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  uint64_t d = Fnv(x.data(), x.size() * sizeof x[0]);
  d = Fnv(note.data(), note.size(), d);
  std::vector<uint64_t> all(static_cast<size_t>(size));
  MPI_Gather(&d, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::vector<int64_t> starts(static_cast<size_t>(size));
  MPI_Gather(&started, 1, MPI_INT64_T, starts.data(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r) std::printf("rank %d digest %016llx\n", r, static_cast<unsigned long long>(all[static_cast<size_t>(r)]));
    std::fprintf(stderr, "ml_app: restarted at step %lld\n", static_cast<long long>(starts[0]));
  }
  MPI_Finalize();
  return 0;
}
