// What the fd plugin's lock scan (fd_locks.cpp: each regular file's and directory's fdinfo read for its
// "lock:" lines) adds to a checkpoint per open descriptor, against the calls the fd plugin already makes
// for each (readlink of /proc/self/fd/N, fstat, two fcntl, lseek), in the same run; and what it costs when
// every descriptor holds a lock. Medians of RUNS.
// Run: build/bench/plugins/fd_locks_bench [fds=2000] [runs=7] [dir=/var/tmp]
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_support.h"
#include "plugins/common/file_locks.h"

// The archive's wrappers (open, read... of the signal and vpid plugins) come with the engine's symbols.
namespace revive::inject {
int checkpoint_signal() { return SIGRTMAX - 2; }
}  // namespace revive::inject

using revive::plugins::file_locks_of;
using revive::plugins::LockRecord;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double scan(const std::vector<int>& fds) {
  LockRecord out[8];
  char why[200];
  double t0 = now();
  for (int fd : fds) file_locks_of(fd, out, 8, why, sizeof why);
  return now() - t0;
}

double baseline(const std::vector<int>& fds) {
  char link[64], path[4096];
  double t0 = now();
  for (int fd : fds) {
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    struct stat st;
    if (readlink(link, path, sizeof path) < 0 || fstat(fd, &st) != 0) abort();
    fcntl(fd, F_GETFL);
    fcntl(fd, F_GETFD);
    lseek(fd, 0, SEEK_CUR);
  }
  return now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  int nfds = argc > 1 ? atoi(argv[1]) : 2000;
  int runs = argc > 2 ? atoi(argv[2]) : 7;
  std::string dir = argc > 3 ? argv[3] : "/var/tmp";
  std::string file = dir + "/fd_locks_bench." + std::to_string(getpid());
  int f = open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (f < 0) return perror("open"), 1;
  close(f);
  std::vector<int> fds;
  for (int i = 0; i < nfds; ++i) {
    int fd = open(file.c_str(), O_RDWR);
    if (fd < 0) return perror("open (raise ulimit -n?)"), 1;
    fds.push_back(fd);
  }
  std::vector<double> base, none, locked;
  for (int r = 0; r < runs; ++r) {
    base.push_back(baseline(fds));
    none.push_back(scan(fds));
  }
  for (int fd : fds) flock(fd, LOCK_SH);  // shared: every description may hold one
  for (int r = 0; r < runs; ++r) locked.push_back(scan(fds));
  unlink(file.c_str());
  double b = median(base), n = median(none), l = median(locked);
  printf("fd plugin per-descriptor calls (readlink, fstat, 2 fcntl, lseek): %.2f ms for %d fds (%.2f us each)\n",
         b * 1e3, nfds, b * 1e6 / nfds);
  printf("lock scan, no locks:      %.2f ms (%.2f us each, %.2fx the existing calls)\n", n * 1e3, n * 1e6 / nfds, n / b);
  printf("lock scan, a lock on each: %.2f ms (%.2f us each, %.2fx the existing calls)\n", l * 1e3, l * 1e6 / nfds, l / b);
  return 0;
}
