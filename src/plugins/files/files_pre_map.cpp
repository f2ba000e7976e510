// Pre-images (files_pre.cpp) of files about to change through a shared mapping. A write through a
// MAP_SHARED mapping changes the file's bytes anywhere, with no call a wrapper could see: the file is kept
// (a copy) when the mapping becomes writable -- at mmap with PROT_WRITE, or at an mprotect adding it. This
// matters for a file opened O_RDWR|O_APPEND after the checkpoint, whose open kept only its size (a cut-back
// record): without the copy a restart cut it back to its checkpoint size but left the bytes the mapping
// rewrote. (A file opened for writing without O_APPEND was copied at its open; one open at the checkpoint
// is in the images: for those the hook finds the work done and costs one statx.)
//
// mprotect: the mapping may have been made long before (even before the checkpoint), through a descriptor
// closed since; /proc/self/maps names its file. Reading it costs some 10-25 us, so the mmap wrapper notes
// the address range of every shared mapping of a file opened for reading and writing (only such a mapping
// can become writable) in a small table, and an mprotect asking for PROT_WRITE reads the maps only when
// its range meets one of them: other mprotects (a garbage collector's, a JIT's) pay a table scan.
// Entries are never removed (munmap is not wrapped): a stale one costs a useless read of the maps when
// its addresses are mapped again; when the table is full, the maps are read for every such mprotect
// (g_full), and a mapping moved by mremap is not followed. Raw system calls and a stack buffer, the table
// read without a lock: an mprotect may come from a signal handler.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "inject/sys.h"
#include "plugins/files/files_pre.h"

namespace revive::plugins {
namespace {

namespace sys = inject::sys;

// Shared mappings of files open read-write: [lo, hi), filled in order (g_used), inherited by fork
// children with the mappings. A slot is claimed under g_lock (mmap wrappers only), published by g_used.
struct Range {
  uint64_t lo, hi;
};
constexpr int kRanges = 64;
Range g_ranges[kRanges];
int g_used;
int g_lock;
volatile int g_full;  // a mapping did not fit: every mprotect adding PROT_WRITE reads the maps

void note_range(uint64_t lo, uint64_t hi) {
  if (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) {  // another thread is noting one: no waiting
    g_full = 1;
    return;
  }
  const int n = __atomic_load_n(&g_used, __ATOMIC_RELAXED);
  bool known = false;
  for (int k = 0; k < n && !known; ++k) known = g_ranges[k].lo == lo && g_ranges[k].hi == hi;
  if (!known && n == kRanges) g_full = 1;
  if (!known && n < kRanges) {
    g_ranges[n] = Range{lo, hi};
    __atomic_store_n(&g_used, n + 1, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE);
}

bool meets_range(uint64_t lo, uint64_t hi) {
  if (g_full) return true;
  const int n = __atomic_load_n(&g_used, __ATOMIC_ACQUIRE);
  for (int k = 0; k < n; ++k)
    if (g_ranges[k].lo < hi && lo < g_ranges[k].hi) return true;
  return false;
}

bool is_shared(int flags) { return (flags & MAP_TYPE) == MAP_SHARED || (flags & MAP_TYPE) == MAP_SHARED_VALIDATE; }

uint64_t parse_hex(const char*& p, const char* end) {
  uint64_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    v = v << 4 | uint64_t(d);
  }
  return v;
}

// One line of /proc/self/maps ("start-end perms offset dev inode   path"): a shared mapping of a named
// file overlapping [lo, hi) gets its pre-image.
// The line ends at `end` (its newline), which becomes the path's terminator.
void consider_line(const char* p, char* end, uint64_t lo, uint64_t hi) {
  const uint64_t start = parse_hex(p, end);
  if (p >= end || *p != '-') return;
  ++p;
  const uint64_t stop = parse_hex(p, end);
  if (stop <= lo || start >= hi || end - p < 6) return;
  if (p[4] != 's') return;  // " rw-s": the fourth permission letter is p (private) or s (shared)
  const char* path = static_cast<const char*>(memchr(p, '/', size_t(end - p)));
  if (!path) return;
  const size_t n = size_t(end - path);
  constexpr char kDeleted[] = " (deleted)";  // no name left: the fd plugin's, not a pre-image's
  if (n >= sizeof kDeleted - 1 && memcmp(end - (sizeof kDeleted - 1), kDeleted, sizeof kDeleted - 1) == 0) return;
  *end = '\0';
  pre_path(AT_FDCWD, path, false);
}

void scan_maps(uint64_t lo, uint64_t hi) {
  int fd = int(sys::sc(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return;
  char buf[PATH_MAX + 256];
  size_t have = 0;
  for (;;) {
    long got = sys::sc(SYS_read, fd, buf + have, sizeof buf - have);
    if (got <= 0) break;
    have += size_t(got);
    size_t used = 0;
    for (;;) {
      char* nl = static_cast<char*>(memchr(buf + used, '\n', have - used));
      if (!nl) break;
      consider_line(buf + used, nl, lo, hi);
      used = size_t(nl - buf) + 1;
    }
    if (used == 0 && have == sizeof buf) have = 0;  // a line longer than any path: not one of ours
    memmove(buf, buf + used, have - used);
    have -= used;
  }
  sys::sc(SYS_close, fd);
}

}  // namespace

void pre_map(int fd, int prot, int flags) {
  if (fd < 0 || (flags & MAP_ANONYMOUS) || !is_shared(flags)) return;
  if (prot & PROT_WRITE) pre_fd(fd);
}

void pre_mapped(void* addr, size_t len, int fd, int prot, int flags) {
  if (addr == MAP_FAILED || fd < 0 || (flags & MAP_ANONYMOUS) || !is_shared(flags)) return;
  const int e = errno;
  const long fl = (prot & PROT_WRITE) ? long(O_RDWR) : sys::sc(SYS_fcntl, fd, F_GETFL);
  if (fl >= 0 && (fl & O_ACCMODE) == O_RDWR) note_range(uint64_t(uintptr_t(addr)), uint64_t(uintptr_t(addr)) + len);
  errno = e;
}

void pre_mprotect(const void* addr, size_t len, int prot) {
  if (!(prot & PROT_WRITE)) return;
  const uint64_t lo = uint64_t(uintptr_t(addr)), hi = lo + (len ? len : 1);
  if (!meets_range(lo, hi) || !pre_active()) return;
  const int e = errno;
  scan_maps(lo, hi);
  errno = e;
}

}  // namespace revive::plugins
