// mpi_ckpt_test: collective behaviour of revive::mpi::Checkpoint, run under mpirun with 2 or 4 ranks.
//
//   mpi_ckpt_test DIR SCENARIO [mpiio]
//     roundtrip   write iterations 1..3 (plain arrays, a vector, a strided MPI derived datatype); a new
//                 checkpoint object restarts from iteration 3 on every rank with every byte as written,
//                 the datatype's holes untouched, and the files carry the ".<rank>" suffix.
//     delete      as above, then the last rank's file of the newest version is deleted: every rank must
//                 restart from iteration 2 (the newest version complete on every rank).
//     corrupt     as delete, but one byte in the middle of the last rank's file is flipped.
//     async-delete  as delete, the three versions written asynchronously (async copy mode).
//     mismatch    restart with a derived datatype of another element count: a revive::Error naming the
//                 key, on every rank, instead of a crash.
//     writefail   (built with REVIVE_MPI_TEST_FAULTS) the last rank's fsync of version 4 fails: every rank
//                 gets a revive::Error, rank 0 publishes no manifest, and restart reads iteration 3.
// With "mpiio" every scenario runs in shared-file mode (Options::mpiio: one file per version written with
// MPI-IO, MPI initialised with MPI_THREAD_MULTIPLE for the async scenario): roundtrip checks that the
// version holds the shared file and no per-rank file, and writes zstd-compressed records; delete truncates the shared file in the middle of
// the last rank's byte range (the manifest's range= line); corrupt flips a byte in the middle of that
// range; writefail fails rank 0's first fsync while it publishes version 4 (the ranks' data goes through
// MPI-IO, not the library's Env), so every rank gets "publishing version 4 failed".
//     threadlevel (mpiio only) MPI initialised with MPI_THREAD_FUNNELED: an async shared-file checkpoint is
//                 refused at construction (MPI-IO from the writer thread needs MPI_THREAD_MULTIPLE), a
//                 synchronous one works.
// Exit status 0 only if every check passes on every rank.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "revive/checkpoint_mpi.hpp"
#ifdef REVIVE_MPI_TEST_FAULTS
#include "applevel/env_hook.h"  // white-box: the library's filesystem fault injection
#include "core/fault_env.h"
#endif

namespace fs = std::filesystem;

namespace {

int g_rank = 0, g_size = 1, g_failures = 0;
bool g_mpiio = false;     // shared-file mode
bool g_compress = false;  // zstd (the mpiio roundtrip: compressed records in the shared file)

#define EXPECT(cond, ...)                                                     \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "rank %d: FAILED %s (line %d): ", g_rank, #cond, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                                      \
      std::fprintf(stderr, "\n");                                             \
      ++g_failures;                                                           \
    }                                                                         \
  } while (0)

constexpr int kRows = 64, kCols = 8;  // the derived datatype picks column 3 of a kRows x kCols matrix

double Value(int rank, int64_t it, int k) { return rank * 1000.0 + it * 10.0 + k * 0.001; }

struct Data {
  std::vector<double> vec = std::vector<double>(5000);
  int64_t arr[16] = {};
  double matrix[kRows][kCols] = {};
  int64_t iteration = 0;
  void Fill(int it) {
    for (size_t k = 0; k < vec.size(); ++k) vec[k] = Value(g_rank, it, static_cast<int>(k));
    for (int k = 0; k < 16; ++k) arr[k] = g_rank * 100 + it * 16 + k;
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) matrix[r][c] = c == 3 ? Value(g_rank, it, r) : -1.0;
    iteration = it;
  }
};

revive::Options Opts(const std::string& dir, bool async = false) {
  revive::Options o;
  o.base_path = dir;
  o.keep = 3;
  o.async = async;
  o.mpiio = g_mpiio;
  o.compress = g_compress;
  return o;
}

MPI_Datatype Column(int rows) {
  MPI_Datatype t;
  MPI_Type_vector(rows, 1, kCols, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  return t;
}

void Register(revive::mpi::Checkpoint& cp, Data& d, MPI_Datatype col) {
  cp.add("vec", d.vec);
  cp.add("arr", d.arr, 16);
  cp.add("column", &d.matrix[0][3], 1, col);
  cp.add("iteration", &d.iteration);
  cp.commit();
}

void WriteThree(const std::string& dir, bool async) {
  MPI_Datatype col = Column(kRows);
  Data d;
  revive::mpi::Checkpoint cp("mpitest", MPI_COMM_WORLD, Opts(dir, async));
  Register(cp, d, col);
  EXPECT(!cp.restart_if_needed(), "fresh directory must not restart");
  for (int it = 1; it <= 3; ++it) {
    d.Fill(it);
    cp.update_and_write(it, 1);
  }
  cp.wait();
  MPI_Type_free(&col);
}

// Restarts in a new object and checks that every rank read iteration `expect` exactly.
void CheckRestart(const std::string& dir, int expect) {
  MPI_Datatype col = Column(kRows);
  Data d;  // zeroed; the datatype's holes stay 0 unless MPI_Unpack wrote outside the column
  revive::mpi::Checkpoint cp("mpitest", MPI_COMM_WORLD, Opts(dir));
  Register(cp, d, col);
  int64_t next = 0;
  const bool found = cp.restart_if_needed(&next);
  EXPECT(found, "no version found");
  EXPECT(next == expect + 1, "restarted at iteration %lld, expected %d", static_cast<long long>(next), expect + 1);
  Data want;
  want.Fill(expect);
  EXPECT(d.iteration == expect, "stored iteration %lld", static_cast<long long>(d.iteration));
  EXPECT(d.vec == want.vec, "vector content differs");
  EXPECT(std::memcmp(d.arr, want.arr, sizeof d.arr) == 0, "array content differs");
  bool column_ok = true, holes_ok = true;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      if (c == 3 && d.matrix[r][c] != want.matrix[r][c]) column_ok = false;
      if (c != 3 && d.matrix[r][c] != 0.0) holes_ok = false;
    }
  EXPECT(column_ok, "derived-datatype column differs");
  EXPECT(holes_ok, "MPI_Unpack wrote outside the derived datatype");
  // Every rank must agree on the version.
  long long mine = next, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  EXPECT(lo == hi, "ranks restarted from different iterations (%lld..%lld)", lo - 1, hi - 1);
  if (g_rank == 0) std::printf("restarted from iteration %lld on all %d ranks\n", lo - 1, g_size);
  MPI_Type_free(&col);
}

fs::path NewestDir(const std::string& dir) {
  fs::path newest;
  uint64_t best = 0;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "mpitest")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("v-", 0) != 0) continue;
    const uint64_t v = std::strtoull(n.c_str() + 2, nullptr, 10);
    if (v > best) best = v, newest = e.path();
  }
  return newest;
}

// The file of `key` written by `rank` in the newest version directory.
fs::path NewestFile(const std::string& dir, const std::string& key, int rank) {
  return NewestDir(dir) / (key + "." + std::to_string(rank));
}

constexpr char kShared[] = "ranks@shared";

// Shared-file mode: the last rank's byte range in the newest version's shared file, from its MANIFEST
// (range=<offset> <length> <checksum>, one line per rank in rank order).
void LastRankRange(const std::string& dir, uint64_t* offset, uint64_t* length) {
  std::ifstream in(NewestDir(dir) / "MANIFEST");
  std::string line, last;
  while (std::getline(in, line))
    if (line.rfind("range=", 0) == 0) last = line;
  EXPECT(!last.empty(), "no range= line in %s/MANIFEST", NewestDir(dir).c_str());
  *offset = *length = 0;
  std::sscanf(last.c_str(), "range=%lu %lu", offset, length);
}

void CheckSuffixes(const std::string& dir) {
  for (const char* key : {"vec", "arr", "column", "iteration"}) {
    const fs::path p = NewestFile(dir, key, g_rank);
    if (g_mpiio)
      EXPECT(!fs::exists(p), "per-rank file %s in shared-file mode", p.c_str());
    else
      EXPECT(fs::exists(p), "missing per-rank file %s", p.c_str());
  }
  if (g_mpiio) EXPECT(fs::exists(NewestDir(dir) / kShared), "missing shared file in %s", NewestDir(dir).c_str());
}

void Damage(const std::string& dir, bool remove) {
  if (g_rank == g_size - 1) {
    fs::path p = NewestFile(dir, "vec", g_rank);
    uint64_t off = 0, len = 0;
    if (g_mpiio) {
      p = NewestDir(dir) / kShared;
      LastRankRange(dir, &off, &len);
      EXPECT(len > 0 && fs::file_size(p) == off + len, "last rank's range [%lu, +%lu) does not end the file",
             static_cast<unsigned long>(off), static_cast<unsigned long>(len));
    }
    if (remove && g_mpiio) {
      fs::resize_file(p, off + len / 2);  // a torn shared file: the last rank's bytes end half way
    } else if (remove) {
      EXPECT(fs::remove(p), "could not delete %s", p.c_str());
    } else {
      std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(0, std::ios::end);
      const std::streamoff mid = g_mpiio ? static_cast<std::streamoff>(off + len / 2) : f.tellg() / 2;
      char c = 0;
      f.seekg(mid);
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x5a);
      f.seekp(mid);
      f.write(&c, 1);
      EXPECT(f.good(), "could not corrupt %s", p.c_str());
    }
    std::fprintf(stderr, "rank %d: %s %s\n", g_rank, remove ? (g_mpiio ? "truncated" : "deleted") : "corrupted",
                 p.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void CheckMismatch(const std::string& dir) {
  MPI_Datatype col = Column(kRows / 2);  // half the elements: the stored object does not fit
  Data d;
  revive::mpi::Checkpoint cp("mpitest", MPI_COMM_WORLD, Opts(dir));
  Register(cp, d, col);
  std::string msg;
  try {
    cp.restart_if_needed();
  } catch (const revive::Error& e) {
    msg = e.what();
  }
  EXPECT(msg.find("column") != std::string::npos, "expected an error naming key 'column', got '%s'",
         msg.c_str());
  if (g_rank == 0) std::printf("mismatch reported: %s\n", msg.c_str());
  MPI_Type_free(&col);
}

void CheckThreadLevel(const std::string& dir) {
  Data d;
  MPI_Datatype col = Column(kRows);
  std::string msg;
  try {
    revive::mpi::Checkpoint cp("mpitest", MPI_COMM_WORLD, Opts(dir, true));
  } catch (const revive::Error& e) {
    msg = e.what();
  }
  EXPECT(msg.find("MPI_THREAD_MULTIPLE") != std::string::npos && msg.find("MPI_THREAD_FUNNELED") != std::string::npos,
         "expected a refusal naming the thread levels, got '%s'", msg.c_str());
  if (g_rank == 0) std::printf("async shared-file mode refused: %s\n", msg.c_str());
  MPI_Type_free(&col);
}

#ifdef REVIVE_MPI_TEST_FAULTS
// Visibility is collective: a version that failed on one rank must not become visible on any.
void CheckWriteFailure(const std::string& dir) {
  revive::FaultEnv fault(revive::Env::Default());
  // File per rank: the last rank's first fsync of the next write (a data file). Shared file: the data
  // goes through MPI-IO, so fail rank 0's first fsync, the version directory's before the manifest.
  if (g_rank == (g_mpiio ? 0 : g_size - 1)) {
    fault.FailNth(revive::FaultEnv::Op::kSync, 1);
    revive::applevel::SetEnvForTesting(&fault);
  }
  MPI_Datatype col = Column(kRows);
  Data d;
  std::string msg;
  {
    revive::mpi::Checkpoint cp("mpitest", MPI_COMM_WORLD, Opts(dir));
    Register(cp, d, col);
    d.Fill(4);
    try {
      cp.write(4);
    } catch (const revive::Error& e) {
      msg = e.what();
    }
  }
  revive::applevel::SetEnvForTesting(nullptr);
  MPI_Type_free(&col);
  const char* want = g_mpiio ? "publishing version 4 failed" : "writing version 4 failed";
  EXPECT(msg.find(want) != std::string::npos, "expected '%s', got '%s'", want, msg.c_str());
  if (g_rank == 0 || g_rank == g_size - 1) std::printf("rank %d: write failure reported: %s\n", g_rank, msg.c_str());
  EXPECT(!fs::exists(fs::path(dir) / "mpitest" / "v-4" / "MANIFEST"), "version 4 was published");
  CheckRestart(dir, 3);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  g_mpiio = argc == 4 && std::string(argv[3]) == "mpiio";
  // Shared-file mode with async writing runs MPI-IO on the writer thread: MPI_THREAD_MULTIPLE.
  int provided = 0;
  const bool funneled = argc >= 3 && std::string(argv[2]) == "threadlevel";
  MPI_Init_thread(&argc, &argv, funneled ? MPI_THREAD_FUNNELED : g_mpiio ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
                  &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc != 3 && !(argc == 4 && g_mpiio)) {
    if (g_rank == 0)
      std::fprintf(stderr, "usage: mpi_ckpt_test DIR roundtrip|delete|corrupt|async-delete|mismatch|writefail [mpiio]\n");
    MPI_Finalize();
    return 2;
  }
  const std::string dir = argv[1], scenario = argv[2];
  g_compress = g_mpiio && scenario == "roundtrip";
  if (g_rank == 0) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    if (scenario != "threadlevel") {
      WriteThree(dir, scenario.rfind("async-", 0) == 0);
      CheckSuffixes(dir);
    }
    if (scenario == "threadlevel") {
      CheckThreadLevel(dir);
      WriteThree(dir, false);  // synchronous shared-file mode needs no thread support
      CheckSuffixes(dir);
      CheckRestart(dir, 3);
    } else if (scenario == "roundtrip") {
      CheckRestart(dir, 3);
    } else if (scenario == "delete" || scenario == "corrupt" || scenario == "async-delete") {
      Damage(dir, scenario != "corrupt");
      CheckRestart(dir, 2);
    } else if (scenario == "mismatch") {
      CheckMismatch(dir);
#ifdef REVIVE_MPI_TEST_FAULTS
    } else if (scenario == "writefail") {
      CheckWriteFailure(dir);
#endif
    } else {
      EXPECT(false, "unknown scenario %s", scenario.c_str());
    }
  } catch (const revive::Error& e) {
    EXPECT(false, "unexpected revive::Error: %s", e.what());
  }
  int local = g_failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s: %s (%d failed checks over %d ranks)\n", scenario.c_str(),
                               total == 0 ? "PASS" : "FAIL", total, g_size);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
