// vpid_bench [--table LIB] N_FORK: one round of getpid, kill(self, 0), waitpid(WNOHANG) on a running
// child, fork+_exit+waitpid, libc's syscall(SYS_getpid) and open+read+close of /proc/self/stat; prints
// "getpid_ns kill_ns waitpid_ns fork_us syscall_getpid_ns proc_stat_us" (each the median of 5 batches).
// With --table LIB it first makes a virtual-pid table as `revive restart` would (this process
// registered under another id, 200 other entries before it) and re-executes itself (same pid) with
// LD_PRELOAD=LIB and REVIVE_VPID_TABLE, so every call goes through the active wrappers; the table is
// removed at the end.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../bench_timing.h"
#include "plugins/vpid/vpid_table.h"

namespace {

volatile pid_t sink;

int with_table(const char* lib, char** argv) {
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/revive-vpid-bench-%d", int(getpid()));
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  const uint64_t bytes = revive::vpid::table_bytes(revive::vpid::kCapacity);
  if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) return perror(path), 2;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return perror("mmap"), 2;
  revive::vpid::Table::format(m, revive::vpid::kCapacity);
  revive::vpid::Table t;
  t.attach(m);
  for (uint32_t i = 0; i < 200; ++i) t.insert(4000000 + i, 3000000 + i);  // other processes and threads
  t.insert(4100000, uint32_t(getpid()));  // we are a restored process whose kernel pid changed
  setenv("LD_PRELOAD", lib, 1);
  setenv(revive::vpid::kEnv, path, 1);
  execv("/proc/self/exe", argv);  // same pid: the entry above is ours; main() removes the file
  perror("exec");
  unlink(path);
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && strcmp(argv[1], "--table") == 0) {
    std::vector<char*> args = {argv[0]};
    for (int i = 3; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    return with_table(argv[2], args.data());
  }
  const long nfork = argc > 1 ? atol(argv[1]) : 100;
  const pid_t self = getpid();
  double g = median_ns(5, 2000000, [] { sink = getpid(); });
  double k = median_ns(5, 200000, [self] { sink = pid_t(kill(self, 0)); });
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  double w = median_ns(5, 200000, [child] { sink = waitpid(child, nullptr, WNOHANG); });
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  double f = median_ns(5, nfork, [] {
    pid_t c = fork();
    if (c == 0) _exit(0);
    int st;
    sink = waitpid(c, &st, 0);
  });
  double sg = median_ns(5, 2000000, [] { sink = pid_t(syscall(SYS_getpid)); });
  double ps = median_ns(5, 20000, [] {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY);
    sink = pid_t(read(fd, buf, sizeof buf));
    close(fd);
  });
  const char* t = getenv(revive::vpid::kEnv);
  // Under the table, getpid() must be our registered id (the wrappers are really in use).
  if (t && (getpid() != 4100000 || syscall(SYS_getpid) != 4100000)) {
    fprintf(stderr, "vpid_bench: getpid() is %d, not the virtual id: the wrappers are not active\n", int(getpid()));
    return 3;
  }
  if (t) unlink(t);
  printf("%.1f %.1f %.1f %.1f %.1f %.2f\n", g, k, w, f / 1000.0, sg, ps / 1000.0);
  return 0;
}
