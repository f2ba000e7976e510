// Cost of the wrappers that keep a file opened O_APPEND from being rewritten unseen (files_pre_wrap.cpp,
// files_pre_map.cpp), each against the raw system calls with no wrapper (the physical limit), with a
// generation set (pre-images on): mmap+munmap of anonymous memory (one branch), mprotect of anonymous
// memory (a scan of the table of shared read-write file mappings, before and after one is made), mprotect
// adding PROT_WRITE to a shared file mapping (a read of /proc/self/maps), mmap MAP_SHARED|PROT_WRITE of a file kept already (one
// statx and the table), and the common path the change must leave alone: an append through
// open(O_APPEND)+write+close of a file whose cut-back record exists. Medians of RUNS.
// Run: files_pre_map_bench [runs=7] [dir=/var/tmp]
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "../bench_timing.h"
#include "bench_support.h"
#include "inject/sys.h"
#include "plugins/files/files_pre.h"
#include "plugins/plugins.h"

namespace revive::inject {
int checkpoint_signal() { return SIGRTMAX - 2; }
bool fd_reserved(int fd) { return fd <= 2; }
}  // namespace revive::inject

namespace {

namespace sys = revive::inject::sys;
constexpr int kIters = 20000;

// Microseconds per call of f, median of runs.
template <typename F>
double per_call(int runs, int iters, F f) {
  return median_ns(runs, iters, f) / 1e3;
}

// libc's own functions, past the wrappers: what a program paid before they existed.
using MmapFn = void* (*)(void*, size_t, int, int, int, off_t);
using MprotectFn = int (*)(void*, size_t, int);
MmapFn libc_mmap;
MprotectFn libc_mprotect;

void row(const char* what, double wrapped, double libc, double raw) {
  printf("%-60s wrapped %7.3f us, libc %7.3f us, raw %7.3f us (the limit); wrapped/libc %.2fx, wrapped/raw %.2fx\n",
         what, wrapped, libc, raw, wrapped / libc, wrapped / raw);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  std::string dir = std::string(argc > 2 ? argv[2] : "/var/tmp") + "/revive-pre-map-bench-" + std::to_string(getpid());
  std::string gen = dir + "/ckpt-1";
  std::filesystem::create_directories(dir);
  const std::string f = dir + "/data.bin", log = dir + "/log.txt";
  for (const std::string& p : {f, log}) {
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char> b(1 << 16, 'x');
    if (write(fd, b.data(), b.size()) != ssize_t(b.size())) return 1;
    close(fd);
  }
  struct timespec ts = {0, 30000000};  // past the coarse clock's tick: the files' ctime is older than ckpt-1
  nanosleep(&ts, nullptr);
  std::filesystem::create_directories(gen);
  revive::plugins::pre_restored((gen + "/x.rimg").c_str());
  if (!revive::plugins::pre_active()) {
    fprintf(stderr, "files_pre_map_bench: pre-images are not on for %s (no birth times?)\n", gen.c_str());
    return 1;
  }
  libc_mmap = reinterpret_cast<MmapFn>(dlsym(RTLD_NEXT, "mmap"));
  libc_mprotect = reinterpret_cast<MprotectFn>(dlsym(RTLD_NEXT, "mprotect"));
  if (!libc_mmap || !libc_mprotect || libc_mmap == &mmap) {
    fprintf(stderr, "files_pre_map_bench: the wrappers are not linked in\n");
    return 1;
  }
  const size_t len = 1 << 16;
  row("mmap+munmap anonymous 64 KiB",
      per_call(runs, kIters, [&] { munmap(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), len); }),
      per_call(runs, kIters, [&] { munmap(libc_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), len); }),
      per_call(runs, kIters, [&] {
        long p = sys::sc(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        sys::sc(SYS_munmap, p, len);
      }));
  void* anon = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const double anon_raw = per_call(runs, kIters, [&] {
    sys::sc(SYS_mprotect, anon, 4096, PROT_READ);
    sys::sc(SYS_mprotect, anon, 4096, PROT_READ | PROT_WRITE);
  });
  const double anon_libc = per_call(runs, kIters, [&] {
    libc_mprotect(anon, 4096, PROT_READ);
    libc_mprotect(anon, 4096, PROT_READ | PROT_WRITE);
  });
  row("mprotect R then RW of anonymous memory (2 calls)", per_call(runs, kIters, [&] {
        mprotect(anon, 4096, PROT_READ);
        mprotect(anon, 4096, PROT_READ | PROT_WRITE);
      }), anon_libc, anon_raw);
  // The first shared writable mapping keeps the file (a copy, once); the following find it kept.
  int fd = open(f.c_str(), O_RDWR);
  munmap(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), len);
  const long copies = revive::plugins::pre_stats().preserved;
  row("mmap MAP_SHARED|PROT_WRITE of a file kept already + munmap",
      per_call(runs, kIters / 4, [&] { munmap(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), len); }),
      per_call(runs, kIters / 4, [&] { munmap(libc_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), len); }),
      per_call(runs, kIters / 4, [&] {
        long p = sys::sc(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        sys::sc(SYS_munmap, p, len);
      }));
  void* shared = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  row("mprotect R then RW of a shared file mapping (2 calls, maps read)", per_call(runs, kIters / 10, [&] {
        mprotect(shared, len, PROT_READ);
        mprotect(shared, len, PROT_READ | PROT_WRITE);
      }), per_call(runs, kIters / 10, [&] {
        libc_mprotect(shared, len, PROT_READ);
        libc_mprotect(shared, len, PROT_READ | PROT_WRITE);
      }), per_call(runs, kIters / 10, [&] {
        sys::sc(SYS_mprotect, shared, len, PROT_READ);
        sys::sc(SYS_mprotect, shared, len, PROT_READ | PROT_WRITE);
      }));
  row("mprotect R then RW of anonymous memory, after that (2 calls)", per_call(runs, kIters, [&] {
        mprotect(anon, 4096, PROT_READ);
        mprotect(anon, 4096, PROT_READ | PROT_WRITE);
      }), anon_libc, anon_raw);
  // The common path: appending to a log kept by its size (the first open wrote the cut-back record). Its
  // wrappers (open's, vpid_proc.cpp) are not changed by these: "libc" here is the raw calls too.
  const char line[64] = "a line of a log, 64 bytes with its newline ...................\n";
  close(open(log.c_str(), O_WRONLY | O_APPEND));
  const double append_raw = per_call(runs, kIters, [&] {
    long l = sys::sc(SYS_openat, AT_FDCWD, log.c_str(), O_WRONLY | O_APPEND);
    sys::sc(SYS_write, l, line, sizeof line);
    sys::sc(SYS_close, l);
  });
  row("open(O_APPEND)+write 64 B+close of a log kept by its size",
      per_call(runs, kIters, [&] {
        int l = open(log.c_str(), O_WRONLY | O_APPEND);
        if (write(l, line, sizeof line) != ssize_t(sizeof line)) abort();
        close(l);
      }),
      append_raw, append_raw);
  printf("pre-images: copies %ld (1 expected: the shared mapping's file), cut-back records %ld (1 expected)\n", copies,
         revive::plugins::pre_stats().cut_back);
  std::filesystem::remove_all(dir);
  return 0;
}
