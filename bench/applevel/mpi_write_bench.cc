// mpi_write_bench: write time of an MPI checkpoint of S MiB per rank, one file per key and rank vs one
// shared file per version (MPI-IO, Options::mpiio), against the physical limit measured in the same run.
//
//   mpirun -n N mpi_write_bench --dir D [--mib 64] [--reps 5]
//
// Every repetition runs these ways, in an order rotated from one repetition to the next (each after an
// MPI_Barrier; a time is the slowest rank's, until the data is durable):
//   raw     every rank write(2)s its S MiB into a new file of its own + fsync
//   raw-st  the same, streamed out of the page cache as the library streams its files (raw_io.h): the
//           fastest way to write a new file on this VM, so the physical limit the ratios refer to
//   mpiio   the same bytes with MPI_File_write_at_all into one new shared file at rank * S + sync (what
//           MPI-IO itself costs, without revive)
//   files   revive::mpi::Checkpoint::write(), file-per-rank mode
//   shared  the same in shared-file mode
// Nothing is deleted until the end (the checkpoints keep every version): deleting a large file is slow on
// this VM and, done by a checkpoint's writer thread after its publication, it would overlap and slow down
// whichever way runs next.
// Prints the median of --reps per way, its ratio to raw-st (>1: faster), and every repetition's time.
#include <mpi.h>

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

namespace fs = std::filesystem;

namespace {

using bench::Median;
using bench::Timed;

int g_rank = 0, g_size = 1;

bool MpiioWrite(const std::string& path, const std::vector<char>& data) {
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
    return false;
  MPI_Status st;
  const MPI_Offset at = static_cast<MPI_Offset>(g_rank) * static_cast<MPI_Offset>(data.size());
  bool ok = MPI_File_write_at_all(fh, at, data.data(), static_cast<int>(data.size()), MPI_BYTE, &st) == MPI_SUCCESS;
  ok = MPI_File_sync(fh) == MPI_SUCCESS && ok;
  ok = MPI_File_close(&fh) == MPI_SUCCESS && ok;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  std::string dir;
  int mib = 64, reps = 5;
  CLI::App app{"MPI checkpoint write time: file per rank vs one shared file (MPI-IO) vs raw write+fsync"};
  app.add_option("--dir", dir, "directory on the disk to measure")->required();
  app.add_option("--mib", mib, "MiB per rank (< 2048)")->check(CLI::Range(1, 2047));
  app.add_option("--reps", reps, "repetitions")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = g_rank == 0 ? app.exit(e) : 1;
    MPI_Finalize();
    return rc;
  }
  const std::string root = dir + "/mpi_write_bench";
  if (g_rank == 0) {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  std::vector<char> data(static_cast<size_t>(mib) << 20);
  uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(g_rank + 1);
  for (char& c : data) {  // not compressible, different on every rank
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }

  auto opts = [&](bool mpiio) {
    revive::Options o;
    o.base_path = root;
    o.keep = reps + 1;
    o.mpiio = mpiio;
    return o;
  };
  std::map<std::string, std::vector<double>> t;
  const std::vector<std::string> ways = {"raw", "raw-st", "mpiio", "files", "shared"};
  {  // the checkpoints are destroyed (their background deletion of old versions finished) before cleanup
  revive::mpi::Checkpoint files("files", MPI_COMM_WORLD, opts(false));
  revive::mpi::Checkpoint shared("shared", MPI_COMM_WORLD, opts(true));
  for (auto* cp : {&files, &shared}) {
    cp->add("data", data.data(), data.size());
    cp->commit();
  }

  const std::string mine = root + "/raw." + std::to_string(g_rank) + ".";
  auto write_cp = [&](revive::mpi::Checkpoint& cp, int r) {
    try {
      cp.write(r);
      return true;
    } catch (const revive::Error& e) {
      std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
      return false;
    }
  };
  for (int r = 0; r < reps; ++r) {
    const std::string n = std::to_string(r);
    // The order rotates from one repetition to the next, so that no way always follows the same one (a
    // way leaves dirty or freshly dropped page cache behind, which changes the next one's time).
    for (size_t k = 0; k < ways.size(); ++k) {
      const std::string& w = ways[(k + static_cast<size_t>(r)) % ways.size()];
      t[w].push_back(Timed([&] {
        if (w == "raw") return bench::RawWriteFsync(mine + n, data.data(), data.size()) >= 0;
        if (w == "raw-st") return bench::RawWriteStreamedFsync(mine + "st." + n, data.data(), data.size()) >= 0;
        if (w == "mpiio") return MpiioWrite(root + "/mpiio." + n, data);
        return write_cp(w == "files" ? files : shared, r);
      }));
    }
  }

  }

  if (g_rank == 0) {
    const double raw = Median(t["raw-st"]);
    const double total_mib = static_cast<double>(mib) * g_size;
    std::printf("%d ranks x %d MiB (%.0f MiB per version), median of %d; time until durable (slowest rank)\n",
                g_size, mib, total_mib, reps);
    for (const std::string& w : ways) {
      const double m = Median(t[w]);
      std::string all;
      char b[32];
      for (double v : t[w]) {
        std::snprintf(b, sizeof b, " %.3f", v);
        all += b;
      }
      std::printf("  %-6s %7.3f s  %7.1f MiB/s  raw-st/this %.2f   (%s )\n", w.c_str(), m, total_mib / m, raw / m, all.c_str());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) fs::remove_all(root);
  MPI_Finalize();
  return 0;
}
