// vpid_table_test PROG INJECT_LIB: the virtual-pid table's slots (insert, lookups both ways, removal,
// fresh ids, concurrent inserters), its validation, and a process started with REVIVE_VPID_TABLE naming a
// missing, foreign or damaged file: it must stop with exit 125 and a message naming the file, never run
// on with wrong ids or crash.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <string>
#include <vector>

#include "plugins/vpid/vpid_table.h"

using revive::vpid::Table;

static int failures = 0;
#define CHECK(c)                                                      \
  do {                                                                \
    if (!(c)) {                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static std::string run_with_table(const char* prog, const char* lib, const char* table, int* code) {
  int p[2];
  if (pipe(p) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 2);
    close(p[0]);
    setenv("LD_PRELOAD", lib, 1);
    setenv("REVIVE_VPID_TABLE", table, 1);
    unsetenv("REVIVE_PORT");
    execl(prog, prog, "3", (char*)nullptr);
    _exit(127);
  }
  close(p[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) err.append(buf, size_t(n));
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return err;
}

// A new process whose kernel pid is a virtual id in use gets a fresh id above PID_MAX_LIMIT: the next
// pid is steered with /proc/sys/kernel/ns_last_pid (root; skipped otherwise) onto a pid the table lists
// as another process's virtual id, and that child, an exec'ed shell under the library, prints $$.
static void fresh_id_on_collision(const char* lib) {
  const uint32_t cap = 64;
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/revive-vpid-test-%d", int(getpid()));
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0 && ftruncate(fd, off_t(revive::vpid::table_bytes(cap))) == 0);
  void* m = mmap(nullptr, revive::vpid::table_bytes(cap), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(m != MAP_FAILED);
  Table::format(m, cap);
  Table t;
  t.attach(m);
  bool done = false;
  for (int attempt = 0; attempt < 20 && !done; ++attempt) {
    FILE* f = fopen("/proc/sys/kernel/ns_last_pid", "r+");
    long last = 0;
    if (!f || fscanf(f, "%ld", &last) != 1) {
      if (f) fclose(f);
      printf("skipped the fresh-id check: /proc/sys/kernel/ns_last_pid not readable\n");
      done = true;
      break;
    }
    long x = last + 500;
    char probe[64];
    snprintf(probe, sizeof probe, "/proc/%ld", x);
    if (access(probe, F_OK) == 0) continue;
    // x .. x+3: virtual ids of (say) us and our threads
    for (long k = 0; k < 4; ++k) t.insert(uint32_t(x + k), uint32_t(getpid()));
    rewind(f);
    if (fprintf(f, "%ld", x - 1) < 0 || fflush(f) != 0) {
      fclose(f);
      printf("skipped the fresh-id check: cannot write ns_last_pid (no CAP_SYS_ADMIN)\n");
      done = true;
      break;
    }
    fclose(f);
    int p[2];
    if (pipe(p) != 0) break;
    pid_t c = fork();
    if (c == 0) {
      dup2(p[1], 1);
      setenv("LD_PRELOAD", lib, 1);
      setenv("REVIVE_VPID_TABLE", path, 1);
      // The shell's own id (exec'ed image), then its child's (a fork child, then that image).
      execl("/bin/sh", "sh", "-c", "echo $$; /bin/sh -c 'echo $$'", (char*)nullptr);
      _exit(127);
    }
    close(p[1]);
    char buf[64] = "";
    ssize_t n = 0;
    for (ssize_t r; n < ssize_t(sizeof buf) - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - size_t(n))) > 0;) n += r;
    close(p[0]);
    waitpid(c, nullptr, 0);
    for (long k = 0; k < 4; ++k) t.remove_virt(uint32_t(x + k));
    if (c != x) {  // another process took the pid first: again
      printf("attempt %d: child got pid %d, not %ld\n", attempt, int(c), x);
      continue;
    }
    long outer = 0, inner = 0;
    buf[n > 0 ? n : 0] = 0;
    if (sscanf(buf, "%ld %ld", &outer, &inner) != 2) {
      printf("attempt %d: the shell printed '%s'\n", attempt, buf);
      continue;
    }
    CHECK(outer >= long(revive::vpid::kFreshBase));
    CHECK(t.real_of(uint32_t(outer)) == uint32_t(x));  // its parent (we) did not reap it through a wrapper
    if (inner < long(revive::vpid::kFreshBase)) {  // its child's pid was not steered onto x+1..x+3
      printf("attempt %d: the shell's child is %ld\n", attempt, inner);
      continue;
    }
    CHECK(inner != outer);
    printf("fresh ids: %ld for kernel pid %ld, %ld for its child\n", outer, x, inner);
    done = true;
  }
  munmap(m, revive::vpid::table_bytes(cap));
  unlink(path);
  CHECK(done);
}

int main(int argc, char** argv) {
  const uint32_t cap = 64;
  std::vector<uint64_t> mem(revive::vpid::table_bytes(cap) / 8 + 1, 0);
  Table::format(mem.data(), cap);
  CHECK(Table::validate(mem.data(), revive::vpid::table_bytes(cap)) == nullptr);
  Table t;
  t.attach(mem.data());
  CHECK(t.insert(100, 5000));
  CHECK(t.insert(101, 5001));
  CHECK(t.real_of(100) == 5000 && t.virt_of(5001) == 101 && t.real_of(5000) == 0 && t.virt_of(100) == 0);
  CHECK(t.remove_real(5000) && !t.remove_real(5000) && t.real_of(100) == 0);
  CHECK(t.insert(102, 5002) && t.h->used == 2);  // the freed slot is reused
  uint32_t f = t.fresh();
  CHECK(f >= revive::vpid::kFreshBase);
  CHECK(t.remove_virt(101) && t.count() == 1);
  // Concurrent inserters fill every slot exactly once.
  Table::format(mem.data(), cap);
  std::vector<std::thread> th;
  for (uint32_t k = 0; k < 4; ++k)
    th.emplace_back([&t, k] {
      for (uint32_t i = 0; i < 16; ++i) t.insert(1000 + k * 16 + i, 2000 + k * 16 + i);
    });
  for (auto& x : th) x.join();
  CHECK(t.count() == 64 && !t.insert(1, 1));
  for (uint32_t i = 0; i < 64; ++i) CHECK(t.real_of(1000 + i) == 2000 + i);
  // Validation.
  CHECK(Table::validate(mem.data(), revive::vpid::table_bytes(cap) - 8) != nullptr);
  t.slot[3] = uint64_t(7) << 32;  // real id 0
  CHECK(Table::validate(mem.data(), revive::vpid::table_bytes(cap)) != nullptr);
  t.slot[3] = 0;
  t.h->capacity = 65;
  CHECK(Table::validate(mem.data(), revive::vpid::table_bytes(cap)) != nullptr);
  t.h->capacity = cap;

  if (argc > 2) {
    int code = 0;
    const std::string missing = "/tmp/revive-vpid-test-missing-" + std::to_string(getpid());
    std::string err = run_with_table(argv[1], argv[2], missing.c_str(), &code);
    CHECK(code == 125 && err.find(missing) != std::string::npos && err.find("cannot open") != std::string::npos);
    const std::string bad = "/tmp/revive-vpid-test-bad-" + std::to_string(getpid());
    int fd = open(bad.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "garbage garbage garbage garbage garbage", 40) == 40);
    err = run_with_table(argv[1], argv[2], bad.c_str(), &code);
    CHECK(code == 125 && err.find(bad) != std::string::npos && err.find("not a virtual-pid table") != std::string::npos);
    // Right size and magic, damaged header check.
    std::vector<uint64_t> good(revive::vpid::table_bytes(cap) / 8, 0);
    Table::format(good.data(), cap);
    reinterpret_cast<revive::vpid::Header*>(good.data())->check ^= 1;
    CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, good.data(), good.size() * 8, 0) == ssize_t(good.size() * 8));
    err = run_with_table(argv[1], argv[2], bad.c_str(), &code);
    CHECK(code == 125 && err.find(bad) != std::string::npos && err.find("damaged header") != std::string::npos);
    // A sound table without an entry for the process: it runs, with its own ids.
    Table::format(good.data(), cap);
    CHECK(pwrite(fd, good.data(), good.size() * 8, 0) == ssize_t(good.size() * 8));
    err = run_with_table(argv[1], argv[2], bad.c_str(), &code);
    CHECK(code == 0);
    close(fd);
    unlink(bad.c_str());
    if (failures) fprintf(stderr, "last stderr: %s\n", err.c_str());
    fresh_id_on_collision(argv[2]);
  }
  if (failures) return 1;
  printf("OK\n");
  return 0;
}
