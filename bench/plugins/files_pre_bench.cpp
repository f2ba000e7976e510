// Cost of pre-images (files plugin, files_pre.cpp): the first open(O_WRONLY) after a checkpoint of an
// existing file of 1 MiB and 64 MiB, which keeps its contents in the generation directory (copy or clone,
// fsync, XXH3, record), against a plain cp of the same bytes (copy_file_range into a new file, as
// coreutils' cp does) with and without an fsync; and an open that needs nothing kept (the file was kept
// already, or changed after the checkpoint: one fstatat) against the same open with no generation.
// The first open(O_WRONLY|O_APPEND) after a checkpoint, which keeps only the file's size (a cut-back
// record; before 2026-11-27 it took the same copy as O_WRONLY, the "before" figure printed beside it), and
// the first O_TRUNC open after appends, which copies the checkpoint-time bytes then.
// Medians of RUNS. Run: files_pre_bench [runs=7] [dir=/var/tmp]
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_support.h"
#include "plugins/files/files_pre.h"
#include "plugins/plugins.h"

namespace revive::inject {
int checkpoint_signal() { return SIGRTMAX - 2; }
bool fd_reserved(int fd) { return fd <= 2; }
}  // namespace revive::inject

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void make_file(const std::string& path, size_t mib) {
  std::vector<char> buf(1 << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = char(i * 131 + 7);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (size_t k = 0; k < mib; ++k)
    if (write(fd, buf.data(), buf.size()) != ssize_t(buf.size())) abort();
  fsync(fd);
  close(fd);
}

double cp(const std::string& src, const std::string& dst, bool sync) {
  double t0 = now();
  int in = open(src.c_str(), O_RDONLY), out = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  while (copy_file_range(in, nullptr, out, nullptr, size_t(1) << 30, 0) > 0) {
  }
  if (sync) fsync(out);
  close(in);
  close(out);
  double t = now() - t0;
  unlink(dst.c_str());
  return t;
}

double open_close(const std::string& path, int flags = O_WRONLY) {
  double t0 = now();
  int fd = open(path.c_str(), flags);
  close(fd);
  return now() - t0;
}

// Appends `bytes` to path (not timed).
void append(const std::string& path, size_t bytes) {
  std::vector<char> buf(bytes, 'a');
  int fd = open(path.c_str(), O_WRONLY | O_APPEND);
  if (write(fd, buf.data(), buf.size()) != ssize_t(buf.size())) abort();
  close(fd);
}

// A new generation directory the file is older than; the bench process "was restored" from it.
std::string new_generation(const std::string& dir, int k) {
  struct timespec ts = {0, 30000000};  // past the coarse clock's tick: the file's ctime is older
  nanosleep(&ts, nullptr);
  std::string gen = dir + "/ckpt-" + std::to_string(k);
  std::filesystem::create_directories(gen);
  revive::plugins::pre_restored((gen + "/x.rimg").c_str());
  return gen;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  std::string dir = std::string(argc > 2 ? argv[2] : "/var/tmp") + "/revive-pre-bench-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  int gen_k = 0;
  for (size_t mib : {1, 64}) {
    const std::string f = dir + "/data.bin";
    make_file(f, mib);
    std::vector<double> pre, plain, c, cs;
    for (int r = 0; r < runs; ++r) {
      std::string gen = new_generation(dir, ++gen_k);
      pre.push_back(open_close(f));   // keeps the pre-image
      plain.push_back(open_close(f)); // kept already: the fast path
      c.push_back(cp(f, dir + "/copy.bin", false));
      cs.push_back(cp(f, dir + "/copy.bin", true));
      std::filesystem::remove_all(gen);
    }
    double p = median(pre) - median(plain);
    printf("%3zu MiB: first open(O_WRONLY) after a checkpoint %.2f ms (+%.2f ms over an open); cp %.2f ms, "
           "cp+fsync %.2f ms; ratio to cp %.1fx, to cp+fsync %.2fx\n",
           mib, median(pre) * 1e3, p * 1e3, median(c) * 1e3, median(cs) * 1e3, p / median(c), p / median(cs));
  }
  // O_APPEND: the first open after a checkpoint keeps the size only; the full copy it took before (the
  // O_WRONLY path, measured in the same run); then appends and an O_TRUNC open, which copies the
  // checkpoint-time bytes (64 MiB) of the now longer file.
  {
    const std::string f = dir + "/log.bin";
    std::vector<double> app, full, plain, trunc;
    for (int r = 0; r < runs; ++r) {
      make_file(f, 64);
      std::string gen = new_generation(dir, ++gen_k);
      app.push_back(open_close(f, O_WRONLY | O_APPEND));
      plain.push_back(open_close(f, O_WRONLY | O_APPEND));  // kept already: the fast path
      append(f, 1 << 20);
      trunc.push_back(open_close(f, O_WRONLY | O_TRUNC));
      std::filesystem::remove_all(gen);
      make_file(f, 64);
      gen = new_generation(dir, ++gen_k);
      full.push_back(open_close(f, O_WRONLY));
      std::filesystem::remove_all(gen);
    }
    printf(" 64 MiB: first open(O_WRONLY|O_APPEND) after a checkpoint %.3f ms (an open kept already %.3f ms); "
           "before (a full copy, as O_WRONLY) %.2f ms: %.0fx less; O_TRUNC after 1 MiB of appends (copies the "
           "64 MiB then) %.2f ms; cut-back records %ld, copies %ld\n",
           median(app) * 1e3, median(plain) * 1e3, median(full) * 1e3, median(full) / median(app), median(trunc) * 1e3,
           revive::plugins::pre_stats().cut_back, revive::plugins::pre_stats().preserved);
    unlink(f.c_str());
  }
  // Opens that keep nothing, 20000 each: for writing, the file kept already (one fstatat and the table).
  const std::string f = dir + "/data.bin";
  std::vector<double> with, without;
  for (int r = 0; r < runs; ++r) {
    std::string gen = new_generation(dir, ++gen_k);
    open_close(f);
    double t0 = now();
    for (int i = 0; i < 20000; ++i) open_close(f);
    with.push_back((now() - t0) / 20000);
    std::filesystem::remove_all(gen);
  }
  // The same opens read-only: the hook returns at its first test (no generation check, no fstatat).
  for (int r = 0; r < runs; ++r) {
    double t0 = now();
    for (int i = 0; i < 20000; ++i) {
      int fd = open(f.c_str(), O_RDONLY);
      close(fd);
    }
    without.push_back((now() - t0) / 20000);
  }
  // What the check is: one fstatat of the path (the hook's first and, here, only system call).
  std::vector<double> st;
  for (int r = 0; r < runs; ++r) {
    struct stat sb;
    double t0 = now();
    for (int i = 0; i < 20000; ++i) fstatat(AT_FDCWD, f.c_str(), &sb, 0);
    st.push_back((now() - t0) / 20000);
  }
  printf("open(O_WRONLY)+close needing nothing kept: %.2f us; open(O_RDONLY)+close (no check): %.2f us; "
         "ratio %.2fx; one fstatat: %.2f us\n", median(with) * 1e6, median(without) * 1e6,
         median(with) / median(without), median(st) * 1e6);
  std::filesystem::remove_all(dir);
  return 0;
}
