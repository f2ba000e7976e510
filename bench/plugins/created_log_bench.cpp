// Cost of the creation log (files plugin, created_log.cpp): creating a file under a node-local directory
// through the wrappers, which record it (statx of the new file, open/write/close of the log), against the
// same wrapped call outside the node-local directories (a prefix test, no record) and against the raw
// system calls with no wrapper at all (the physical limit: openat + close + unlink); mkstemp likewise.
// Then the walk's side: reading and sorting a log of N records once per checkpoint, and its lookups.
// Medians of RUNS. Run: created_log_bench [runs=7] [files=5000] [dir=/var/tmp]
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_support.h"
#include "inject/sys.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_internal.h"

namespace {
std::string g_ck;
}

namespace revive::inject {
int checkpoint_signal() { return SIGRTMAX - 2; }
bool fd_reserved(int fd) { return fd <= 2; }
const char* checkpoint_dir() { return g_ck.c_str(); }
}  // namespace revive::inject

namespace {

namespace sys = revive::inject::sys;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// n files created with open(O_CREAT|O_EXCL) (the wrapper), closed and removed: seconds per file.
double wrapped(const std::string& dir, int n) {
  std::string p = dir + "/f";
  double t0 = now();
  for (int i = 0; i < n; ++i) {
    std::string q = p + std::to_string(i);
    int fd = open(q.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    close(fd);
    sys::sc(SYS_unlinkat, AT_FDCWD, q.c_str(), 0);
  }
  return (now() - t0) / n;
}

double raw(const std::string& dir, int n) {
  std::string p = dir + "/f";
  double t0 = now();
  for (int i = 0; i < n; ++i) {
    std::string q = p + std::to_string(i);
    long fd = sys::sc(SYS_openat, AT_FDCWD, q.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    sys::sc(SYS_close, fd);
    sys::sc(SYS_unlinkat, AT_FDCWD, q.c_str(), 0);
  }
  return (now() - t0) / n;
}

double temps(const std::string& dir, int n) {
  double t0 = now();
  for (int i = 0; i < n; ++i) {
    std::string t = dir + "/ccXXXXXX.s";
    int fd = mkstemps(t.data(), 2);
    close(fd);
    sys::sc(SYS_unlinkat, AT_FDCWD, t.c_str(), 0);
  }
  return (now() - t0) / n;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  int n = argc > 2 ? atoi(argv[2]) : 5000;
  std::string base = std::string(argc > 3 ? argv[3] : "/var/tmp") + "/revive-created-bench-" + std::to_string(getpid());
  std::string local = base + "/local", other = base + "/other";
  g_ck = base + "/ck";
  for (auto& d : {local, other, g_ck}) std::filesystem::create_directories(d);
  setenv("REVIVE_LAUNCH_T0", "1", 1);  // launched: the wrappers record
  setenv("REVIVE_LOCAL_DIRS", local.c_str(), 1);
  if (revive::plugins::files_init() != 0) return 1;
  std::vector<double> rec, norec, sc, mk;
  for (int r = 0; r < runs; ++r) {
    rec.push_back(wrapped(local, n));
    norec.push_back(wrapped(other, n));
    sc.push_back(raw(local, n));
    mk.push_back(temps(local, n));
  }
  const double limit = median(sc);
  printf("create+close+unlink per file: recorded %.2f us, wrapped not node-local %.2f us, raw system calls "
         "%.2f us (the limit); ratio recorded/limit %.2fx, not node-local/limit %.2fx; mkstemps recorded %.2f us\n",
         median(rec) * 1e6, median(norec) * 1e6, limit * 1e6, median(rec) / limit, median(norec) / limit,
         median(mk) * 1e6);
  // The walk: the log now holds runs * 2n records; load (map, verify, sort) and look every one up.
  std::vector<double> load, look;
  uint64_t count = 0;
  for (int r = 0; r < runs; ++r) {
    double t0 = now();
    if (revive::plugins::created_load() != revive::plugins::CreatedLoad::kOk) return 1;
    load.push_back(now() - t0);
    count = revive::plugins::created_count();
    t0 = now();
    int hits = 0;
    for (uint64_t i = 0; i < count; ++i) hits += revive::plugins::created_has(i, i, 0, 0);
    look.push_back((now() - t0) / double(count));
    revive::plugins::created_unload();
    if (hits < 0) return 1;
  }
  struct stat st;
  stat((g_ck + "/" + revive::plugins::kCreatedName).c_str(), &st);
  printf("walk: load of %llu records (%lld bytes) %.2f ms, %.3f us a record; lookup %.3f us\n",
         (unsigned long long)count, (long long)st.st_size, median(load) * 1e3, median(load) / double(count) * 1e6,
         median(look) * 1e6);
  std::filesystem::remove_all(base);
  return 0;
}
