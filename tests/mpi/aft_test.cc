// In-job recovery (revive::mpi::Recovery) under a real SIGKILL: the test script kills a random rank at a
// random moment; the job must finish by itself and print exactly what an uninterrupted run prints.
//
//   aft_test <ckpt-dir> replace|shrink <iterations>
//
// replace: each rank owns a slice of a 1-D field, exchanges its edges with its ring neighbours and takes a
//   global sum every iteration; the field and the running sum are checkpointed every 4
//   iterations. After a failure the replacement reads the dead rank's slice from the last checkpoint and the
//   survivors re-read theirs (the zone restarts from there). Integer arithmetic, so the result is exact.
// shrink: the work of an iteration is a sum over a fixed index range split among however many ranks there
//   are; survivors keep their memory (iteration, running sum), agree on the last iteration completed by
//   all, and continue with one rank less. Integer sums do not depend on how the range is split.
// Every process writes its pid to <ckpt-dir>/pids/<pid> once its Recovery is set up, so the script can
// pick a victim.
#include <mpi.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "revive/checkpoint_mpi.hpp"
#include "revive/recovery_mpi.hpp"

namespace {
constexpr int kSlice = 4096;
uint64_t Mix(uint64_t x) {  // splitmix64 step: cheap, deterministic, spreads bits
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <ckpt-dir> replace|shrink <iterations>\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  const std::string dir = argv[1];
  const bool shrink = std::strcmp(argv[2], "shrink") == 0;
  const int iters = std::atoi(argv[3]);
  using revive::mpi::Recovery;
  Recovery rec(MPI_COMM_WORLD, shrink ? Recovery::Mode::kShrink : Recovery::Mode::kReplace, argc, argv);
  // Only now a victim: a death before every rank's detector is up is not recoverable (docs/recovery.md).
  if (FILE* f = std::fopen((dir + "/pids/" + std::to_string(getpid())).c_str(), "w")) std::fclose(f);

  int64_t it = 0;
  uint64_t acc = 0;
  std::vector<uint64_t> field(kSlice);
  // shrink mode, survivors' memory: the state after the last iteration this rank completed, and before.
  int64_t done_it = 0;
  uint64_t done_acc = 0, prev_acc = 0;

  rec.run([&](MPI_Comm comm) {
    int r = 0, n = 1;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    // Buffers of the nonblocking collectives: from the zone (an interrupted collective may write later).
    uint64_t* cb = rec.zone_buffer<uint64_t>(2);
    int64_t* ib = rec.zone_buffer<int64_t>(2);
    if (shrink) {
      // Survivors may be one iteration apart (some completed the last sum before the failure, some not):
      // continue from the last iteration every survivor completed.
      ib[0] = done_it;
      MPI_Request rq;
      MPI_Iallreduce(&ib[0], &ib[1], 1, MPI_INT64_T, MPI_MIN, comm, &rq);
      rec.wait(&rq);
      const int64_t low = ib[1];
      if (low < done_it) done_acc = prev_acc;
      it = done_it = low;
      acc = done_acc;
      const uint64_t range = 1 << 16;
      for (; it < iters; ++it) {
        uint64_t part = 0;
        for (uint64_t i = static_cast<uint64_t>(r); i < range; i += static_cast<uint64_t>(n))
          part += Mix(i ^ (static_cast<uint64_t>(it) << 20));
        cb[0] = part;
        MPI_Iallreduce(&cb[0], &cb[1], 1, MPI_UINT64_T, MPI_SUM, comm, &rq);
        rec.wait(&rq);
        const uint64_t sum = cb[1];
        prev_acc = acc;
        acc = acc * 31 + sum;
        done_it = it + 1;
        done_acc = acc;
        usleep(20000);
      }
      if (r == 0) std::printf("shrink: iterations=%d acc=%016" PRIx64 "\n", iters, acc);
      return;
    }
    for (int i = 0; i < kSlice; ++i) field[static_cast<size_t>(i)] = Mix(static_cast<uint64_t>(r) * kSlice + i);
    it = 0;
    acc = 0;
    revive::Options opts;
    opts.base_path = dir;
    revive::mpi::Checkpoint cp("aft", comm, opts);
    cp.add("field", field.data(), field.size());
    cp.add("acc", &acc);
    cp.commit();
    cp.restart_if_needed(&it);
    const int left = (r + n - 1) % n, right = (r + 1) % n;
    for (; it < iters; ++it) {
      uint64_t from_left = 0, from_right = 0;
      MPI_Request rq[4];
      MPI_Irecv(&from_left, 1, MPI_UINT64_T, left, 1, comm, &rq[0]);
      MPI_Irecv(&from_right, 1, MPI_UINT64_T, right, 2, comm, &rq[1]);
      MPI_Isend(&field[kSlice - 1], 1, MPI_UINT64_T, right, 1, comm, &rq[2]);
      MPI_Isend(&field[0], 1, MPI_UINT64_T, left, 2, comm, &rq[3]);
      rec.wait_all(4, rq);
      uint64_t prev = from_left, local = 0;
      for (int i = 0; i < kSlice; ++i) {
        const uint64_t next = i + 1 < kSlice ? field[static_cast<size_t>(i + 1)] : from_right;
        const uint64_t cur = field[static_cast<size_t>(i)];
        field[static_cast<size_t>(i)] = Mix(prev ^ (cur * 3) ^ (next * 5) ^ static_cast<uint64_t>(it));
        prev = cur;
        local += field[static_cast<size_t>(i)];
      }
      cb[0] = local;
      MPI_Iallreduce(&cb[0], &cb[1], 1, MPI_UINT64_T, MPI_SUM, comm, &rq[0]);
      rec.wait(&rq[0]);
      const uint64_t sum = cb[1];
      acc = acc * 31 + sum;
      usleep(20000);
      cp.update_and_write(it, 4);  // the state after iteration it; a restart continues at it + 1
    }
    if (r == 0) std::printf("replace: ranks=%d iterations=%d acc=%016" PRIx64 "\n", n, iters, acc);
  });
  int r = 0;
  MPI_Comm_rank(rec.comm(), &r);
  if (r == 0 && rec.recoveries() > 0)
    std::fprintf(stderr, "aft_test: rank 0 (%s) saw %d recovery(ies)\n", rec.replacement() ? "a replacement" : "original",
                 rec.recoveries());
  rec.finalize_and_exit(0);
}
