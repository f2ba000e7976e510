// Listings of /proc/self/task and /proc/<pid>/task with the program's thread ids, and of /proc itself
// with the program's pids (since 2026-11-27: a process of the computation appears under the id it knows,
// an outside process under its own): opendir (vpid_proc.cpp) marks the DIR of such a directory while a
// table is mapped, readdir/readdir64 give each numeric entry its virtual id, closedir unmarks it. An
// outside process whose pid equals a virtual id of the computation is listed twice under that number and
// reached as the computation's (the number means the computation's process everywhere else too). Other directories cost readdir one load and a branch (no table)
// or a scan of the few marked DIRs. Not seen: fdopendir, scandir and ftw (glibc reads those
// internally), getdents64 called directly, more than kMarks task directories open at once.
#include <dirent.h>
#include <string.h>

#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

constexpr int kMarks = 32;
DIR* g_marks[kMarks];  // task directories being listed (threads may list their own at once)
int g_nmarked;         // > 0 while any is marked: the common case skips the scan

bool marked(DIR* d) {
  if (__atomic_load_n(&g_nmarked, __ATOMIC_RELAXED) == 0) return false;
  for (DIR*& m : g_marks)
    if (__atomic_load_n(&m, __ATOMIC_ACQUIRE) == d) return true;
  return false;
}

// /proc, /proc/self/task or /proc/<digits>/task, with or without a trailing slash.
bool task_path(const char* p) {
  if (strcmp(p, "/proc") == 0 || strcmp(p, "/proc/") == 0) return true;
  if (strncmp(p, "/proc/", 6) != 0) return false;
  p += 6;
  if (strncmp(p, "self", 4) == 0) {
    p += 4;
  } else {
    const char* q = p;
    while (*p >= '0' && *p <= '9') ++p;
    if (p == q) return false;
  }
  return strcmp(p, "/task") == 0 || strcmp(p, "/task/") == 0;
}

// d_name "<kernel tid>" -> "<virtual tid>" (d_name holds 256 bytes: any id fits).
template <typename Dirent>
void rename_entry(Dirent* e) {
  long v = 0;
  const char* p = e->d_name;
  while (*p >= '0' && *p <= '9' && v < 0x7fffffff) v = v * 10 + (*p++ - '0');
  if (p == e->d_name || *p) return;  // "." and ".."
  revive::plugins::Msg(e->d_name, sizeof e->d_name).i(vpid::to_virt(pid_t(v)));
}

using ReaddirFn = struct dirent* (*)(DIR*);
using Readdir64Fn = struct dirent64* (*)(DIR*);
using ClosedirFn = int (*)(DIR*);
ReaddirFn g_readdir;
Readdir64Fn g_readdir64;
ClosedirFn g_closedir;
VPID_PRIME(g_readdir, "readdir")
VPID_PRIME(g_readdir64, "readdir64")
VPID_PRIME(g_closedir, "closedir")

}  // namespace

namespace revive::vpid {

void dir_opened(const char* path, DIR* d) {
  if (!d || !active() || !path || !task_path(path)) return;
  for (DIR*& m : g_marks) {
    DIR* none = nullptr;
    if (__atomic_compare_exchange_n(&m, &none, d, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      __atomic_fetch_add(&g_nmarked, 1, __ATOMIC_RELEASE);
      return;
    }
  }
}

}  // namespace revive::vpid

REVIVE_EXPORT struct dirent* readdir(DIR* d) {
  ReaddirFn f = next_or_enosys(&g_readdir, "readdir");
  struct dirent* e = f ? f(d) : nullptr;
  if (e && vpid::active() && marked(d)) rename_entry(e);
  return e;
}

REVIVE_EXPORT struct dirent64* readdir64(DIR* d) {
  Readdir64Fn f = next_or_enosys(&g_readdir64, "readdir64");
  struct dirent64* e = f ? f(d) : nullptr;
  if (e && vpid::active() && marked(d)) rename_entry(e);
  return e;
}

REVIVE_EXPORT int closedir(DIR* d) {
  ClosedirFn f = next_or_enosys(&g_closedir, "closedir");
  if (!f) return -1;
  if (__atomic_load_n(&g_nmarked, __ATOMIC_RELAXED) != 0) {
    for (DIR*& m : g_marks) {
      DIR* was = d;
      if (__atomic_compare_exchange_n(&m, &was, nullptr, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        __atomic_fetch_sub(&g_nmarked, 1, __ATOMIC_RELEASE);
        break;
      }
    }
  }
  return f(d);
}
