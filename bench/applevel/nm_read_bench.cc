// nm_read_bench: restart read time of a block-distributed array when the restart uses another number of
// ranks than the checkpoint (N -> M) vs the same number (N -> N), against a raw pread of the same bytes.
//
//   mpirun -n P nm_read_bench --dir D [--writers N] [--readers 4,2,3] [--mib 64] [--reps 5]
//
// The first N ranks write one version of a global uint64 array of N x MiB (one data file per rank). Then,
// per repetition and per reader count M (the first M ranks, on a sub-communicator; P >= max(N, M)):
//   ckpt  restart_if_needed() of M ranks, each declaring an even block of the array
//   raw   every reader pread()s exactly its block's bytes from the old files (no checksum: the physical limit)
// Before each read every old file is evicted from the page cache (fsync + POSIX_FADV_DONTNEED). A time is
// the slowest rank's. The library verifies each old file it takes a part of in full (its payload checksum
// covers the whole file), so it reads more than its block when blocks straddle old files: "read" below is
// those bytes over the array's.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "mpi_timing.h"
#include "raw_io.h"
#include "revive/checkpoint_mpi.hpp"

namespace {

using bench::Median;
using bench::Timed;

int g_rank = 0;

struct Block {
  uint64_t offset, count;
};
Block Share(uint64_t n, int rank, int ranks) {
  const uint64_t r = static_cast<uint64_t>(rank), k = static_cast<uint64_t>(ranks);
  return {r * (n / k) + std::min(r, n % k), n / k + (r < n % k ? 1 : 0)};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app{"N -> M restart read time"};
  std::string dir;
  int writers = 4, reps = 5;
  uint64_t mib = 64;
  std::vector<int> readers{4, 2, 3};
  app.add_option("--dir", dir, "checkpoint directory (the disk measured)")->required();
  app.add_option("--writers", writers, "N: ranks that write the version");
  app.add_option("--readers", readers, "the values of M")->delimiter(',');
  app.add_option("--mib", mib, "MiB per writer");
  app.add_option("--reps", reps, "repetitions (the median is printed)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (g_rank == 0) app.exit(e);
    MPI_Finalize();
    return 1;
  }
  int most = writers;
  for (int m : readers) most = std::max(most, m);
  if (size < most) {
    if (g_rank == 0) std::fprintf(stderr, "nm_read_bench: needs at least %d ranks\n", most);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const uint64_t global = static_cast<uint64_t>(writers) * mib * (1 << 20) / 8;
  revive::Options o;
  o.base_path = dir;
  o.keep = 1;
  const std::string cdir = dir + "/nmbench";
  if (g_rank == 0) std::filesystem::remove_all(cdir);
  MPI_Barrier(MPI_COMM_WORLD);
  // The version, written by the first N ranks.
  MPI_Comm wcomm;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank < writers ? 0 : MPI_UNDEFINED, g_rank, &wcomm);
  if (wcomm != MPI_COMM_NULL) {
    Block b = Share(global, g_rank, writers);
    std::vector<uint64_t> x(b.count);
    for (uint64_t i = 0; i < b.count; ++i) x[i] = (b.offset + i) * 0x9E3779B97F4A7C15ull;
    revive::mpi::Checkpoint cp("nmbench", wcomm, o);
    cp.add_distributed("x", x, b.count, b.offset, global);
    cp.commit();
    cp.write(1);
    MPI_Comm_free(&wcomm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::string> files;
  for (int r = 0; r < writers; ++r) files.push_back(cdir + "/v-1/x." + std::to_string(r));
  const uint64_t header = 64 + 1;  // fixed header + key "x": where the payload starts in each file
  auto evict = [&] {
    if (g_rank == 0)
      for (const auto& f : files) bench::Evict(f);
    MPI_Barrier(MPI_COMM_WORLD);
  };
  std::map<int, std::vector<double>> ck, raw;
  std::map<int, double> read_factor;
  for (int rep = 0; rep < reps; ++rep) {
    for (int m : readers) {
      MPI_Comm rcomm;
      MPI_Comm_split(MPI_COMM_WORLD, g_rank < m ? 0 : MPI_UNDEFINED, g_rank, &rcomm);
      const Block b = Share(global, g_rank, m);
      // Touched before the clock starts, as the raw read's buffer is (a first touch costs a host fault here).
      std::vector<uint64_t> y(g_rank < m ? b.count : 0);
      bool right = true;
      evict();
      double t = Timed([&] {
        if (rcomm == MPI_COMM_NULL) return true;
        revive::mpi::Checkpoint cp("nmbench", rcomm, o);
        cp.add_distributed("x", y, b.count, b.offset, global);
        cp.commit();
        bool read = cp.restart_if_needed();
        for (uint64_t i = 0; i < b.count && right; i += 4097) right = y[i] == (b.offset + i) * 0x9E3779B97F4A7C15ull;
        return read && right;
      });
      ck[m].push_back(t);
      // Raw: exactly this rank's bytes from the old files it overlaps.
      std::vector<uint64_t> z(g_rank < m ? b.count : 0);
      evict();
      t = Timed([&] {
        if (g_rank >= m) return true;
        uint64_t done = 0;
        for (int r = 0; r < writers && done < b.count; ++r) {
          const Block w = Share(global, r, writers);
          const uint64_t lo = std::max(w.offset, b.offset + done), hi = std::min(w.offset + w.count, b.offset + b.count);
          if (lo >= hi) continue;
          int fd = ::open(files[static_cast<size_t>(r)].c_str(), O_RDONLY);
          if (fd < 0) return false;
          char* dst = reinterpret_cast<char*>(z.data() + (lo - b.offset));
          uint64_t len = (hi - lo) * 8, off = header + (lo - w.offset) * 8;
          while (len) {
            ssize_t got = ::pread(fd, dst, std::min<uint64_t>(len, 8u << 20), static_cast<off_t>(off));
            if (got <= 0) return ::close(fd), false;
            dst += got, off += static_cast<uint64_t>(got), len -= static_cast<uint64_t>(got);
          }
          ::close(fd);
          done = hi - b.offset;
        }
        return done == b.count;
      });
      raw[m].push_back(t);
      // Bytes the library reads: every old file a reader overlaps, in full.
      uint64_t mine = 0;
      if (g_rank < m)
        for (int r = 0; r < writers; ++r) {
          const Block w = Share(global, r, writers);
          if (std::max(w.offset, b.offset) < std::min(w.offset + w.count, b.offset + b.count)) mine += w.count;
        }
      uint64_t total = 0;
      MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      read_factor[m] = static_cast<double>(total) / static_cast<double>(global);
      if (rcomm != MPI_COMM_NULL) MPI_Comm_free(&rcomm);
    }
  }
  if (g_rank == 0) {
    std::printf("nm_read_bench: %d writers x %llu MiB, restart read, median of %d (slowest rank; page cache evicted)\n",
                writers, static_cast<unsigned long long>(mib), reps);
    for (int m : readers) {
      const double c = Median(ck[m]), r = Median(raw[m]), mb = static_cast<double>(global) * 8 / 1e6;
      std::printf("  %d -> %d: ckpt %.3f s (%.0f MB/s)  raw pread of the blocks %.3f s (%.0f MB/s)  ratio %.2f  "
                  "library reads %.2fx the array  [ckpt", writers, m, c, mb / c, r, mb / r, r / c, read_factor[m]);
      for (double t : ck[m]) std::printf(" %.3f", t);
      std::printf("]\n");
    }
  }
  MPI_Finalize();
  return 0;
}
