// Cost of saving a large written file by changed blocks (files plugin, files_blocks.cpp), medians of
// several runs: a file of MIB MiB is saved once whole (the first checkpoint), PERMILLE/1000 of its 1 MiB
// blocks then get a small in-place write, and the second save (into a new generation directory) is timed
// against, measured in the same run on the same disk:
//   full:    write + fsync of the whole file (what saving it whole into an image costs at least)
//   changed: write + fsync of the changed blocks' bytes (the least any changed-range method writes)
// Also a save of the file unchanged (the fast path) and the restore of the file from its blocks. Run:
//   files_blocks_bench [mib=1024] [permille=10] [runs=5] [dir=/var/tmp]
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"
#include "bench_support.h"

namespace {
std::string g_gen, g_image;
}  // namespace

namespace revive::inject {
int checkpoint_signal() { return SIGRTMAX - 2; }
bool fd_reserved(int fd) { return fd <= 2; }
const char* generation_dir() { return g_gen.c_str(); }
const char* restored_image() { return g_image.c_str(); }
}  // namespace revive::inject

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// write + fsync of `bytes` into a new file (1 MiB writes), seconds.
double write_fsync(const std::string& path, int64_t bytes, const std::vector<char>& buf) {
  double t0 = now();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  for (int64_t off = 0; off < bytes; off += int64_t(buf.size()))
    if (write(fd, buf.data(), std::min<int64_t>(bytes - off, int64_t(buf.size()))) < 0) abort();
  fsync(fd);
  close(fd);
  double t = now() - t0;
  unlink(path.c_str());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const int64_t mib = argc > 1 ? atol(argv[1]) : 1024;
  const int permille = argc > 2 ? atoi(argv[2]) : 10;
  const int runs = argc > 3 ? atoi(argv[3]) : 5;
  const std::string base = std::string(argc > 4 ? argv[4] : "/var/tmp") + "/revive-blocks-bench-" + std::to_string(getpid());
  const int64_t size = mib << 20;
  const int64_t nblocks = mib;  // 1 MiB blocks
  const int64_t nchanged = std::max<int64_t>(1, nblocks * permille / 1000);
  fs::create_directories(base + "/ck");
  using revive::plugins::g_files;
  g_files.written = true;
  g_files.root = false;
  g_files.max_bytes = size + 1;
  g_files.delta_bytes = 8 << 20;
  const auto& files = revive::inject::kFilesPlugin;

  std::vector<char> buf(1 << 20);
  std::mt19937_64 rng(42);
  for (auto& c : buf) c = char(rng());
  const std::string data = base + "/data.bin";
  int fd = open(data.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  for (int64_t k = 0; k < nblocks; ++k) {
    buf[0] = char(k);
    buf[1] = char(k >> 8);  // every block different
    if (pwrite(fd, buf.data(), buf.size(), k << 20) != ssize_t(buf.size())) abort();
  }
  fsync(fd);

  std::vector<double> second, full, changed, restore, first, unchanged;
  int64_t unchanged_read = 0;
  int gen = 0;
  revive::plugins::FilesBlockStats st{};
  for (int r = 0; r < runs; ++r) {
    BufWriter w;
    g_gen = base + "/ck/ckpt-" + std::to_string(++gen);
    fs::create_directories(g_gen);
    double t0 = now();
    if (files.save(w) != 0) abort();
    first.push_back(now() - t0);
    for (int64_t c = 0; c < nchanged; ++c) {  // small in-place writes in nchanged distinct random blocks
      int64_t blk = int64_t(rng() % uint64_t(nblocks));
      char rec[64];
      snprintf(rec, sizeof rec, "run %d change %lld", r, (long long)c);
      if (pwrite(fd, rec, strlen(rec), (blk << 20) + int64_t(rng() % 4000)) < 0) abort();
    }
    usleep(100000);  // past the kernel's coarse timestamp tick, as a real program between checkpoints
    w.b.clear();
    g_gen = base + "/ck/ckpt-" + std::to_string(++gen);
    fs::create_directories(g_gen);
    t0 = now();
    if (files.save(w) != 0) abort();
    second.push_back(now() - t0);
    st = revive::plugins::files_block_stats();
    g_image = g_gen + "/x.rimg";  // the restore below reads the second save's blocks
    // The file unchanged since that save: the fast path (previous hashes linked, nothing read).
    BufWriter w3;
    g_gen = base + "/ck/ckpt-" + std::to_string(++gen);
    fs::create_directories(g_gen);
    t0 = now();
    if (files.save(w3) != 0) abort();
    unchanged.push_back(now() - t0);
    unchanged_read = revive::plugins::files_block_stats().read_bytes;
    fs::remove_all(g_gen);
    --gen;
    full.push_back(write_fsync(base + "/full.tmp", size, buf));
    changed.push_back(write_fsync(base + "/changed.tmp", int64_t(st.written) << 20, buf));
    BufReader rd(w.b);
    char msg[400] = "";
    t0 = now();
    if (files.restore(rd, msg, sizeof msg) != 0) {
      fprintf(stderr, "restore: %s\n", msg);
      abort();
    }
    restore.push_back(now() - t0);
    // Old generations go, as a user pruning them would; the next save's sweep frees their blocks.
    fs::remove_all(base + "/ck/ckpt-" + std::to_string(gen - 1));
  }
  double s2 = median(second), f = median(full), c = median(changed);
  printf("file %lld MiB, %lld of %lld blocks changed (%.1f%%), medians of %d runs\n", (long long)mib,
         (long long)nchanged, (long long)nblocks, 100.0 * nchanged / nblocks, runs);
  printf("  first save, every block new:      %8.1f ms\n", first[0] * 1e3);
  printf("  second save (changed blocks):     %8.1f ms  (%u blocks written, %u linked, %lld MiB read)\n", s2 * 1e3,
         st.written, st.linked, (long long)(st.read_bytes >> 20));
  printf("  write+fsync of the whole file:    %8.1f ms  -> second save / whole = %.3f\n", f * 1e3, s2 / f);
  printf("  write+fsync of the changed blocks:%8.1f ms  -> second save / changed = %.2f\n", c * 1e3, s2 / c);
  printf("  save of the unchanged file:       %8.1f ms  (%lld bytes read: fast path)\n", median(unchanged) * 1e3,
         (long long)unchanged_read);
  printf("  restore from blocks:              %8.1f ms\n", median(restore) * 1e3);
  close(fd);
  std::error_code ec;
  fs::remove_all(base, ec);
  if (ec) fs::remove_all(base, ec);  // once more: seen "Directory not empty" once on this VM
  if (ec) fprintf(stderr, "could not remove %s: %s\n", base.c_str(), ec.message().c_str());
  return 0;
}
