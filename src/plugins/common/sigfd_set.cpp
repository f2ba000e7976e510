// See sigfd_set.h. One bit per descriptor up to the kernel's default nr_open (1 << 20): 128 KiB of bss,
// of which a program touches one page per 32768 descriptors it marks.
#include "plugins/common/sigfd_set.h"

#include <fcntl.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/proc_fds.h"

namespace revive::plugins {
namespace {

constexpr int kMaxFd = 1 << 20;
uint64_t g_bits[kMaxFd / 64];
// 0: /proc/self/fd not scanned yet in this image (an exec'ed one starts with every bit clear, even for
// a signalfd it inherited); 1: scanned. A race between two first readers only scans twice.
int g_scanned;

bool marked(int fd) {
  return fd >= 0 && fd < kMaxFd &&
         (__atomic_load_n(&g_bits[fd / 64], __ATOMIC_RELAXED) & (uint64_t{1} << (fd % 64))) != 0;
}

void set(int fd, bool on) {
  if (fd < 0 || fd >= kMaxFd) return;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (on) __atomic_or_fetch(&g_bits[fd / 64], bit, __ATOMIC_RELAXED);
  else __atomic_and_fetch(&g_bits[fd / 64], ~bit, __ATOMIC_RELAXED);
}

// Whether fd is a signalfd now (readlink of /proc/self/fd/N: "anon_inode:[signalfd]"). Raw syscall: our
// own readlink wrapper translates /proc paths.
bool is_signalfd(int fd) {
  char path[32], target[32];
  Msg(path, sizeof path).s("/proc/self/fd/").i(fd);
  long l = syscall(SYS_readlinkat, AT_FDCWD, path, target, sizeof target - 1);
  static const char kName[] = "anon_inode:[signalfd]";
  return l == long(sizeof kName - 1) && memcmp(target, kName, sizeof kName - 1) == 0;
}

// Marks the signalfds this image has without having made them (inherited across exec).
void scan_once() {
  if (__atomic_load_n(&g_scanned, __ATOMIC_ACQUIRE)) return;
  int fds[1024];
  int n = list_fds(0, fds, 1024);
  for (int i = 0; i < n; ++i)
    if (is_signalfd(fds[i])) set(fds[i], true);
  __atomic_store_n(&g_scanned, 1, __ATOMIC_RELEASE);
}

}  // namespace

void sigfd_mark(int fd) { set(fd, true); }

void sigfd_copied(int from, int to) {
  if (from == to || to < 0) return;
  // dup2/dup3 onto a marked number replace what it was; a copy of a signalfd is one.
  set(to, marked(from));
}

bool sigfd_is(int fd, long n) {
  if (n <= 0 || n % long(sizeof(signalfd_siginfo)) != 0) return false;
  scan_once();
  if (!marked(fd)) return false;
  if (is_signalfd(fd)) return true;
  set(fd, false);  // closed and the number reused
  return false;
}

}  // namespace revive::plugins
