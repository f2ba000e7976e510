// Listings of /proc/self/task and /proc/<pid>/task with the program's thread ids, and of /proc itself
// with the program's pids (since 2026-11-27: a process of the computation appears under the id it knows,
// an outside process under its own): opendir (vpid_proc.cpp) marks the DIR of such a directory while a
// table is mapped, readdir/readdir64 hand out its entries with virtual ids, closedir unmarks it. An
// outside process whose pid equals a virtual id of the computation is listed twice under that number and
// reached as the computation's (the number means the computation's process everywhere else too). Other
// directories cost readdir one load and a branch (no table) or a scan of the few marked DIRs.
// A marked DIR is listed whole at its first readdir, each id translated then, and handed out from that
// copy (since 2026-11-28): glibc fills its DIR buffer with one getdents64 and hands entries out one by
// one, so a checkpoint in the middle of a listing used to leave the old incarnation's kernel ids in the
// buffer, read after a restart with the new table (vpid.procview's "readdir(/proc)" failure; vpid.dircut).
// The copy is in the program's memory (saved in the image); a restore while it is made makes it again.
// fdopendir marks a DIR made from a descriptor of such a directory
// (find's fts, Python's os.listdir(fd)), and scandir/scandir64 of one are listed here through opendir and
// readdir (glibc's own scandir reads internally, past these wrappers), and libc's getdents64() on a
// descriptor of one gets its records rewritten (getdents64 below); scandirat below; ftw/nftw under /proc
// in vpid_ftw.cpp; readdir_r/readdir64_r too (2026-11-28). A /proc listing opened with opendir is marked
// whether or not a table is mapped (since 2026-11-28): one begun at launch and read on after a restart
// with virtual pids comes from its first readdir's copy, whose ids (the launch's kernel ids) are the
// program's. Not seen: the raw getdents64 system call, a DIR from fdopendir before a table existed (its
// readlink per fdopendir is paid only under a table), more than kMarks task directories open at once.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject/sys.h"

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

// A marked DIR's listing, made at its first readdir: packed dirent64 records with the program's ids.
struct Listing {
  char* buf;    // malloc'ed, `cap` bytes (freed by closedir)
  size_t cap;
  size_t len;   // bytes of records
  size_t pos;   // the next record's offset
  bool taken;   // made (and not rewound since)
};
Listing g_lists[kMarks];  // g_lists[i] belongs to g_marks[i]

// The slot of a marked DIR, -1 if d is not marked.
int mark_of(DIR* d) {
  if (__atomic_load_n(&g_nmarked, __ATOMIC_RELAXED) == 0) return -1;
  for (int i = 0; i < kMarks; ++i)
    if (__atomic_load_n(&g_marks[i], __ATOMIC_ACQUIRE) == d) return i;
  return -1;
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

// d_name "<kernel tid>" -> "<virtual tid>" (d_name holds 256 bytes: any id fits), for an id the kernel
// gave in incarnation `ep` (vpid.h to_virt_since).
template <typename Dirent>
void rename_entry(Dirent* e, uint32_t ep) {
  long v = 0;
  const char* p = e->d_name;
  while (*p >= '0' && *p <= '9' && v < 0x7fffffff) v = v * 10 + (*p++ - '0');
  if (p == e->d_name || *p) return;  // "." and ".."
  revive::plugins::Msg(e->d_name, sizeof e->d_name).i(vpid::to_virt_since(pid_t(v), ep));
}

using ReaddirFn = struct dirent* (*)(DIR*);
using Readdir64Fn = struct dirent64* (*)(DIR*);
using ClosedirFn = int (*)(DIR*);
using FdopendirFn = DIR* (*)(int);
ReaddirFn g_readdir;
Readdir64Fn g_readdir64;
ClosedirFn g_closedir;
FdopendirFn g_fdopendir;
VPID_PRIME(g_readdir, "readdir")
VPID_PRIME(g_readdir64, "readdir64")
VPID_PRIME(g_closedir, "closedir")
VPID_PRIME(g_fdopendir, "fdopendir")

}  // namespace

namespace revive::vpid {

void dir_opened(const char* path, DIR* d) {
  if (!d || !path || !task_path(path)) return;
  for (int i = 0; i < kMarks; ++i) {
    DIR* none = nullptr;
    if (__atomic_compare_exchange_n(&g_marks[i], &none, d, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      g_lists[i].taken = false;  // closedir left it so; d is not handed out before this returns
      __atomic_fetch_add(&g_nmarked, 1, __ATOMIC_RELEASE);
      return;
    }
  }
}

}  // namespace revive::vpid

namespace {

using RewinddirFn = void (*)(DIR*);
RewinddirFn g_rewinddir;
VPID_PRIME(g_rewinddir, "rewinddir")

// Appends e (its name given the program's id) to l. False when memory runs out.
bool append(Listing& l, const struct dirent64* e) {
  constexpr size_t kHead = offsetof(struct dirent64, d_name);
  // Room for the longest renamed record plus a whole dirent64 past the last one: a program that copies
  // `*e` (sizeof struct dirent) reads no further than it may in glibc's own buffer.
  const size_t need = l.len + kHead + 256 + sizeof(struct dirent64);
  if (need > l.cap) {
    size_t cap = l.cap ? 2 * l.cap : 16384;
    while (cap < need) cap *= 2;
    char* b = static_cast<char*>(realloc(l.buf, cap));
    if (!b) return false;
    l.buf = b;
    l.cap = cap;
  }
  auto* r = reinterpret_cast<struct dirent64*>(l.buf + l.len);
  memcpy(r, e, kHead);
  const size_t nl = strnlen(e->d_name, sizeof r->d_name - 1);
  memcpy(r->d_name, e->d_name, nl);
  r->d_name[nl] = 0;
  rename_entry(r, vpid::epoch());
  r->d_reclen = static_cast<unsigned short>((kHead + strlen(r->d_name) + 1 + 7) & ~size_t(7));
  l.len += r->d_reclen;
  return true;
}

// Lists d whole into l with the ids of this incarnation: made again from the start when a restore came
// while it was made (the entries read so far were the old incarnation's). False with errno on an error.
bool take(Listing& l, DIR* d) {
  Readdir64Fn f = next_or_enosys(&g_readdir64, "readdir64");
  RewinddirFn rewind = next_or_enosys(&g_rewinddir, "rewinddir");
  if (!f || !rewind) return false;
  const int saved = errno;
  for (;;) {
    const uint32_t ep = vpid::epoch();
    l.len = 0;
    int err = 0;
    for (;;) {
      errno = 0;
      const struct dirent64* e = f(d);
      if (!e) {
        err = errno;
        break;
      }
      if (!append(l, e)) {
        err = ENOMEM;
        break;
      }
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  // every id translated before the epoch is read again
    if (err) {
      l.len = 0;
      errno = err;
      return false;
    }
    if (__builtin_expect(vpid::epoch() == ep, 1)) break;
    rewind(d);
  }
  l.pos = 0;
  l.taken = true;
  errno = saved;
  return true;
}

struct dirent64* next_listed(int i, DIR* d) {
  Listing& l = g_lists[i];
  if (!l.taken && !take(l, d)) return nullptr;
  if (l.pos >= l.len) return nullptr;  // the end: errno as it was
  auto* e = reinterpret_cast<struct dirent64*>(l.buf + l.pos);
  l.pos += e->d_reclen;
  return e;
}

}  // namespace

REVIVE_EXPORT struct dirent* readdir(DIR* d) {
  if (int i = mark_of(d); i >= 0) return reinterpret_cast<struct dirent*>(next_listed(i, d));
  ReaddirFn f = next_or_enosys(&g_readdir, "readdir");
  return f ? f(d) : nullptr;
}

REVIVE_EXPORT struct dirent64* readdir64(DIR* d) {
  if (int i = mark_of(d); i >= 0) return next_listed(i, d);
  Readdir64Fn f = next_or_enosys(&g_readdir64, "readdir64");
  return f ? f(d) : nullptr;
}

// readdir_r/readdir64_r (deprecated, still used): a marked DIR's next entry copied into the caller's.
namespace {
using ReaddirRFn = int (*)(DIR*, struct dirent*, struct dirent**);
using Readdir64RFn = int (*)(DIR*, struct dirent64*, struct dirent64**);
ReaddirRFn g_readdir_r;
Readdir64RFn g_readdir64_r;
VPID_PRIME(g_readdir_r, "readdir_r")
VPID_PRIME(g_readdir64_r, "readdir64_r")

template <typename Dirent>
int listed_r(int i, DIR* d, Dirent* entry, Dirent** result) {
  const int saved = errno;
  errno = 0;
  struct dirent64* e = next_listed(i, d);
  const int err = errno;
  errno = saved;
  if (!e) {
    *result = nullptr;
    return err;  // 0 at the end, as glibc's
  }
  // Same layout on this ABI (LP64: dirent and dirent64 are one struct): the record's head and its name.
  static_assert(sizeof(Dirent) == sizeof(struct dirent64));
  memcpy(entry, e, offsetof(struct dirent64, d_name));
  const size_t nl = strnlen(e->d_name, sizeof entry->d_name - 1);
  memcpy(entry->d_name, e->d_name, nl);
  entry->d_name[nl] = 0;
  *result = entry;
  return 0;
}
}  // namespace

REVIVE_EXPORT int readdir_r(DIR* d, struct dirent* entry, struct dirent** result) {
  if (int i = mark_of(d); i >= 0) return listed_r(i, d, entry, result);
  ReaddirRFn f = next_or_enosys(&g_readdir_r, "readdir_r");
  return f ? f(d, entry, result) : ENOSYS;
}

REVIVE_EXPORT int readdir64_r(DIR* d, struct dirent64* entry, struct dirent64** result) {
  if (int i = mark_of(d); i >= 0) return listed_r(i, d, entry, result);
  Readdir64RFn f = next_or_enosys(&g_readdir64_r, "readdir64_r");
  return f ? f(d, entry, result) : ENOSYS;
}

// A marked DIR's position is an offset into its listing (telldir, seekdir); rewinddir drops the listing
// (the next readdir lists the directory afresh, as glibc's does).
REVIVE_EXPORT void rewinddir(DIR* d) {
  if (int i = mark_of(d); i >= 0) g_lists[i].taken = false;
  if (RewinddirFn f = next_or_enosys(&g_rewinddir, "rewinddir")) f(d);
}

namespace {
using TelldirFn = long (*)(DIR*);
using SeekdirFn = void (*)(DIR*, long);
TelldirFn g_telldir;
SeekdirFn g_seekdir;
VPID_PRIME(g_telldir, "telldir")
VPID_PRIME(g_seekdir, "seekdir")
}  // namespace

REVIVE_EXPORT long telldir(DIR* d) {
  if (int i = mark_of(d); i >= 0) return g_lists[i].taken ? long(g_lists[i].pos) : 0;
  TelldirFn f = next_or_enosys(&g_telldir, "telldir");
  return f ? f(d) : -1;
}

REVIVE_EXPORT void seekdir(DIR* d, long loc) {
  if (int i = mark_of(d); i >= 0) {
    Listing& l = g_lists[i];
    if (!l.taken && !take(l, d)) return;
    // Only offsets telldir gave (record starts) are valid, as natively; anything else ends the listing.
    l.pos = loc < 0 || size_t(loc) > l.len ? l.len : size_t(loc);
    return;
  }
  if (SeekdirFn f = next_or_enosys(&g_seekdir, "seekdir")) f(d, loc);
}

namespace {

// Whether fd is open on /proc or a task directory, by its path in /proc/self/fd (the kernel's: real ids,
// which task_path accepts as well). A raw readlinkat: the plugin's own readlink wrapper would translate.
bool task_fd(int fd, char* path, size_t cap) {
  char link[32];
  revive::plugins::Msg(link, sizeof link).s("/proc/self/fd/").i(fd);
  long n = revive::inject::sys::sc(SYS_readlinkat, AT_FDCWD, link, path, cap - 1);
  if (n <= 0) return false;
  path[n] = 0;
  return task_path(path);
}

using Getdents64Fn = ssize_t (*)(int, void*, size_t);
Getdents64Fn g_getdents64;
VPID_PRIME(g_getdents64, "getdents64")

}  // namespace

namespace {
// procfs's device number, looked up once (0: not yet; 1: no /proc), so that fdopendir can tell a
// descriptor on /proc with one fstat (the readlink of task_fd is paid only there: fts and find call
// fdopendir for every directory they walk).
uint64_t g_proc_dev;

bool on_proc(int fd) {
  struct stat st;
  if (revive::inject::sys::sc(SYS_fstat, fd, &st) != 0) return false;
  uint64_t dev = __atomic_load_n(&g_proc_dev, __ATOMIC_RELAXED);
  if (dev == 0) {
    struct stat ps;
    dev = revive::inject::sys::sc(SYS_newfstatat, AT_FDCWD, "/proc", &ps, 0) == 0 ? uint64_t(ps.st_dev) : 1;
    if (dev == 0) dev = 1;  // (a device number of 0 is none of procfs's)
    __atomic_store_n(&g_proc_dev, dev, __ATOMIC_RELAXED);
  }
  return uint64_t(st.st_dev) == dev;
}
}  // namespace

REVIVE_EXPORT DIR* fdopendir(int fd) {
  FdopendirFn f = next_or_enosys(&g_fdopendir, "fdopendir");
  DIR* d = f ? f(fd) : nullptr;
  char path[64];
  // Marked with or without a table, as opendir's (a listing begun at launch, read on after a restart).
  if (d && (vpid::active() || on_proc(fd)) && task_fd(fd, path, sizeof path)) vpid::dir_opened(path, d);
  return d;
}

// libc's getdents64(): each numeric name of a task directory's records gets its virtual id. A virtual
// id can be longer than the kernel's (a restart in a pid namespace of its own has 3-digit pids), and a
// record grows by at most 8 bytes from its smallest size, 24 (4/3): so the kernel's records are read into
// the last 3/4 of the buffer and rewritten from its start, each copied out before its place is reused
// (the writer, at most 4/3 of what it consumed, stays behind the reader). Ids are read with the ids of
// the incarnation whose kernel gave them (answered_in, to_virt_since).
REVIVE_EXPORT ssize_t getdents64(int fd, void* buf, size_t len) {
  Getdents64Fn f = next_or_enosys(&g_getdents64, "getdents64");
  if (!f) return -1;
  char path[64];
  if (!vpid::active() || !task_fd(fd, path, sizeof path)) return f(fd, buf, len);
  constexpr size_t kHead = offsetof(struct dirent64, d_name);
  const size_t room = (len / 4 + 7) & ~size_t(7), in_cap = len - room;  // 4 x room >= len: see above
  if (in_cap < sizeof(struct dirent64)) return f(fd, buf, len);  // a tiny buffer: the kernel's ids
  char* const base = static_cast<char*>(buf);
  const vpid::CallStart at = vpid::call_start();
  ssize_t r = f(fd, base + room, in_cap);
  if (r <= 0) return r;
  // The kernel's ids of the incarnation that answered (a checkpoint cut right after the call returned
  // leaves them in hand across a restart).
  const uint32_t ep = vpid::answered_in(at);
  size_t out = 0;
  for (size_t off = 0; off < size_t(r);) {
    const auto* in = reinterpret_cast<const struct dirent64*>(base + room + off);
    if (in->d_reclen < kHead + 1 || off + in->d_reclen > size_t(r)) break;  // never seen: a kernel record
    struct dirent64 e;  // copied out first: the output may reach this record's bytes
    memcpy(&e, in, kHead);
    size_t nl = strnlen(in->d_name, in->d_reclen - kHead);
    memcpy(e.d_name, in->d_name, nl < sizeof e.d_name ? nl : sizeof e.d_name - 1);
    e.d_name[nl < sizeof e.d_name ? nl : sizeof e.d_name - 1] = 0;
    off += in->d_reclen;
    rename_entry(&e, ep);
    e.d_reclen = static_cast<unsigned short>((kHead + strlen(e.d_name) + 1 + 7) & ~size_t(7));
    memcpy(base + out, &e, e.d_reclen);
    out += e.d_reclen;
  }
  return ssize_t(out);
}

REVIVE_EXPORT int closedir(DIR* d) {
  ClosedirFn f = next_or_enosys(&g_closedir, "closedir");
  if (!f) return -1;
  if (int i = mark_of(d); i >= 0) {
    free(g_lists[i].buf);  // before the slot is free for another DIR
    g_lists[i] = Listing{};
    DIR* was = d;
    if (__atomic_compare_exchange_n(&g_marks[i], &was, nullptr, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      __atomic_fetch_sub(&g_nmarked, 1, __ATOMIC_RELEASE);
  }
  return f(d);
}

namespace {

using Filter64 = int (*)(const struct dirent64*);
using Compar64 = int (*)(const struct dirent64**, const struct dirent64**);
using Scandir64Fn = int (*)(const char*, struct dirent64***, Filter64, Compar64);
Scandir64Fn g_scandir64;
VPID_PRIME(g_scandir64, "scandir64")
// On this ABI struct dirent and struct dirent64 are one layout (glibc makes scandir an alias of
// scandir64), so one implementation serves both.
static_assert(sizeof(struct dirent) == sizeof(struct dirent64) &&
              offsetof(struct dirent, d_name) == offsetof(struct dirent64, d_name));

// scandir of a task directory, listed through the wrappers above so the entries carry the program's ids.
// Runs in the program's own call (not in a signal handler): malloc is fine, as in glibc's scandir.
int scan_task_dir(DIR* d, struct dirent64*** out, Filter64 filter, Compar64 compar) {
  if (!d) return -1;
  struct dirent64** v = nullptr;
  size_t n = 0, cap = 0;
  int err = 0;
  for (struct dirent64* e; (errno = 0, e = readdir64(d)) != nullptr;) {
    if (filter && !filter(e)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      auto* w = static_cast<struct dirent64**>(realloc(v, cap * sizeof *v));
      if (!w) {
        err = ENOMEM;
        break;
      }
      v = w;
    }
    size_t len = offsetof(struct dirent64, d_name) + strlen(e->d_name) + 1;
    auto* c = static_cast<struct dirent64*>(malloc(len < sizeof *e ? sizeof *e : len));
    if (!c) {
      err = ENOMEM;
      break;
    }
    memcpy(c, e, len);
    v[n++] = c;
  }
  if (!err) err = errno;
  closedir(d);
  if (err) {
    while (n) free(v[--n]);
    free(v);
    errno = err;
    return -1;
  }
  if (compar) qsort(v, n, sizeof *v, reinterpret_cast<int (*)(const void*, const void*)>(compar));
  *out = v;
  return int(n);
}

}  // namespace

REVIVE_EXPORT int scandir64(const char* path, struct dirent64*** out, Filter64 filter, Compar64 compar) {
  if (vpid::active() && task_path(path)) return scan_task_dir(opendir(path), out, filter, compar);
  Scandir64Fn f = next_or_enosys(&g_scandir64, "scandir64");
  return f ? f(path, out, filter, compar) : -1;
}

namespace {
using Scandirat64Fn = int (*)(int, const char*, struct dirent64***, Filter64, Compar64);
Scandirat64Fn g_scandirat64;
VPID_PRIME(g_scandirat64, "scandirat64")
}  // namespace

// scandirat: a task directory named relative to an open directory too (dirfd on /proc or /proc/<pid>),
// told by what the opened directory is, as fdopendir() does; anything else is glibc's.
REVIVE_EXPORT int scandirat64(int dirfd, const char* path, struct dirent64*** out, Filter64 filter,
                              Compar64 compar) {
  if (vpid::active()) {
    // open() translates an absolute path's ids (vpid_proc.cpp); a relative one names kernel ids below
    // dirfd, whose own path in /proc/self/fd is the kernel's too.
    const int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char real[64];
    if (fd >= 0 && task_fd(fd, real, sizeof real)) {
      DIR* d = fdopendir(fd);
      if (!d) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
      }
      return scan_task_dir(d, out, filter, compar);
    }
    if (fd >= 0) close(fd);
  }
  Scandirat64Fn f = next_or_enosys(&g_scandirat64, "scandirat64");
  return f ? f(dirfd, path, out, filter, compar) : -1;
}

REVIVE_EXPORT int scandirat(int dirfd, const char* path, struct dirent*** out, int (*filter)(const struct dirent*),
                            int (*compar)(const struct dirent**, const struct dirent**)) {
  return scandirat64(dirfd, path, reinterpret_cast<struct dirent64***>(out), reinterpret_cast<Filter64>(filter),
                     reinterpret_cast<Compar64>(compar));
}

REVIVE_EXPORT int scandir(const char* path, struct dirent*** out, int (*filter)(const struct dirent*),
                          int (*compar)(const struct dirent**, const struct dirent**)) {
  return scandir64(path, reinterpret_cast<struct dirent64***>(out), reinterpret_cast<Filter64>(filter),
                   reinterpret_cast<Compar64>(compar));
}
