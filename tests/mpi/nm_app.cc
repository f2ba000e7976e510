// nm_app: an MPI program whose state is a block-distributed array and replicated values, so that a restart
// may use another number of ranks (docs/applevel.md, "Restart with another number of ranks").
//   nm_app OUT STEPS EVERY [private|badtile]
// Every step updates each element from its index, the step and the wrapping sum of the whole array (an
// integer allreduce: the result does not depend on the decomposition, so runs with any rank count print the
// same). At the end rank 0 gathers the array into OUT and prints its digest. NM_PIDS=<dir>: each rank
// writes its pid to <dir>/<rank> (a test kills them); NM_STEP_US: sleep per step (default 20 ms).
// "private" also registers a private key (another rank count must then be refused); "badtile" declares
// blocks that leave an element out (refused at commit).
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "revive/checkpoint_mpi.hpp"

namespace {
constexpr uint64_t kGlobal = 100003;

uint64_t Fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 4) {
    if (rank == 0) std::fprintf(stderr, "usage: nm_app OUT STEPS EVERY [private|badtile]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const std::string mode = argc > 4 ? argv[4] : "";
  const int64_t steps = std::atoll(argv[2]), every = std::atoll(argv[3]);
  const char* us = std::getenv("NM_STEP_US");
  if (const char* d = std::getenv("NM_PIDS")) {
    if (FILE* f = std::fopen((std::string(d) + "/" + std::to_string(rank)).c_str(), "w")) {
      std::fprintf(f, "%d\n", static_cast<int>(getpid()));
      std::fclose(f);
    }
  }
  // This run's decomposition, computed before restart_if_needed (the first ranks take one more element).
  const uint64_t r = static_cast<uint64_t>(rank), n = static_cast<uint64_t>(size);
  uint64_t count = kGlobal / n + (r < kGlobal % n ? 1 : 0);
  const uint64_t offset = r * (kGlobal / n) + std::min(r, kGlobal % n);
  if (mode == "badtile" && rank == size - 1) --count;  // the last element belongs to nobody
  std::vector<uint64_t> x(count);
  for (uint64_t i = 0; i < count; ++i) x[i] = (offset + i) * 2654435761u;
  uint64_t sum = 0;
  std::string note = "start";
  int64_t it = 1, started = 0;
  try {
    revive::mpi::Checkpoint cp("nmapp", MPI_COMM_WORLD);
    cp.add_distributed("x", x, count, offset, kGlobal);
    cp.add_replicated("sum", &sum);
    cp.add_replicated("note", note);
    int mine = rank;
    if (mode == "private") cp.add("mine", &mine);
    cp.commit();
    cp.restart_if_needed(&it);
    started = it;
    for (; it <= steps; ++it) {
      for (uint64_t i = 0; i < count; ++i)
        x[i] = x[i] * 6364136223846793005ull + (offset + i) + static_cast<uint64_t>(it) + (sum >> 7);
      uint64_t local = 0;
      for (uint64_t v : x) local += v;
      MPI_Allreduce(&local, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      note = "step " + std::to_string(it);
      cp.update_and_write(it, every);
      usleep(us ? static_cast<useconds_t>(std::atoi(us)) : 20000);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nm_app rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  // The whole array on rank 0, in global order (blocks are in rank order here).
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  int c = static_cast<int>(count), o = static_cast<int>(offset);
  MPI_Gather(&c, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Gather(&o, 1, MPI_INT, displs.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<uint64_t> all(rank == 0 ? kGlobal : 0);
  MPI_Gatherv(x.data(), c, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (FILE* f = std::fopen(argv[1], "wb")) {
      std::fwrite(all.data(), sizeof all[0], all.size(), f);
      std::fclose(f);
    }
    std::printf("digest %016llx sum %016llx note %s\n", static_cast<unsigned long long>(Fnv(all.data(), all.size() * 8)),
                static_cast<unsigned long long>(sum), note.c_str());
    std::fprintf(stderr, "nm_app: %d ranks, started at step %lld\n", size, static_cast<long long>(started));
  }
  MPI_Finalize();
  return 0;
}
