// /proc/<pid>/... and /proc/<pid>/task/<tid>/... (and /proc/self/task/<tid>) paths the program names
// with its ids: open, openat, fopen, opendir, the stat family (stat, lstat, fstatat, statx and their
// 64 variants), access, faccessat, readlink, readlinkat see the kernel's ids. Only absolute paths (a path relative to an open /proc directory is not translated).
// The open family and fopen also give stat/status files the program's ids inside (vpid_procview.cpp).
// A checkpoint can cut a thread anywhere between translating a path and the kernel reading it: restored,
// the call would name the old incarnation's kernel pid (ENOENT, or another process). A call on a
// translated path whose epoch changed meanwhile is made again (a query) or undone and made again (an
// open: its descriptor closed); vpid.procview's rare "nftw(/proc)" after a restart was a stat of the
// child's /proc directory under its old kernel pid.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_pre.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

// Copies the number at *p (advancing it) translated with to_real into out; false if not a number.
bool number(const char*& p, revive::plugins::Msg& out) {
  if (*p < '0' || *p > '9') return false;
  long v = 0;
  while (*p >= '0' && *p <= '9' && v < 0x7fffffff) v = v * 10 + (*p++ - '0');
  if (*p && *p != '/') return false;
  out.i(vpid::to_real(pid_t(v)));
  return true;
}

// The path with the kernel's ids, in buf; or `path` itself when there is nothing to translate.
const char* translate(const char* path, char* buf, size_t cap) {
  if (!vpid::active() || !path || strncmp(path, "/proc/", 6) != 0) return path;
  revive::plugins::Msg out(buf, cap);
  out.s("/proc/");
  const char* p = path + 6;
  if (strncmp(p, "self/", 5) == 0 || strcmp(p, "self") == 0) {
    out.s("self");
    p += 4;
  } else if (!number(p, out)) {
    return path;
  }
  if (strncmp(p, "/task/", 6) == 0) {
    out.s("/task/");
    p += 6;
    if (!number(p, out)) return path;
  }
  out.s(p);
  return out.size() + 1 < cap ? buf : path;
}

#define TRANSLATED(path) \
  char buf_[PATH_MAX];   \
  const char* real_path = translate(path, buf_, sizeof buf_)

// True when a call just made on real_path (translated from path in epoch `ep`) may have named another
// incarnation's kernel ids: a restore came between the translation and now.
inline bool stale(const char* path, const char* real_path, uint32_t ep) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);  // the call is made before the epoch is read again
  return real_path != path && __builtin_expect(vpid::epoch() != ep, 0);
}

using OpenatFn = int (*)(int, const char*, int, ...);
OpenatFn g_openat, g_openat64;
VPID_PRIME(g_openat, "openat")
VPID_PRIME(g_openat64, "openat64")

// open()'s optional mode argument, read only when the flags say there is one.
#define MODE_ARG(flags)                                                                      \
  mode_t mode = 0;                                                                           \
  if ((flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE) {                           \
    va_list ap;                                                                              \
    va_start(ap, flags);                                                                     \
    mode = mode_t(va_arg(ap, int));                                                          \
    va_end(ap);                                                                              \
  }

// The descriptor fd opened on a path that turned out stale is closed (errno kept); true if it was.
bool undo_stale(const char* path, const char* real_path, uint32_t ep, int fd) {
  if (!stale(path, real_path, ep)) return false;
  if (fd >= 0) {
    const int e = errno;
    close(fd);
    errno = e;
  }
  return true;
}

int open_at(OpenatFn* slot, const char* name, int dir, const char* path, int flags, mode_t mode) {
  OpenatFn f = next_or_enosys(slot, name);
  if (!f) return -1;
  // /proc/<pid>/stat and status: the program's ids in the text too (absolute paths only: dir unused).
  // Paths under /proc create nothing, so making such an open again changes nothing.
  for (;;) {
    const uint32_t ep = vpid::epoch();
    TRANSLATED(path);
    if (real_path == path) break;
    int fd = vpid::kNotAView;
    if (vpid::active() && path[0] == '/') fd = vpid::proc_view(path, real_path, flags);
    if (fd == vpid::kNotAView) fd = f(dir, real_path, flags, mode);
    if (!undo_stale(path, real_path, ep, fd)) return fd;
  }
  TRANSLATED(path);
  if (vpid::active() && path && path[0] == '/') {
    const int v = vpid::proc_view(path, real_path, flags);
    if (v != vpid::kNotAView) return v;
  }
  revive::plugins::pre_open(dir, path, flags);  // a file about to change keeps its checkpoint contents
  if (!(flags & O_CREAT)) return f(dir, real_path, flags, mode);
  const int64_t t = revive::plugins::created_clock();
  const int fd = f(dir, real_path, flags, mode);
  revive::plugins::created_open(fd, dir, path, flags, t);  // a new node-local file: the creation log
  return fd;
}

}  // namespace

// open(p) is openat(AT_FDCWD, p) in the kernel and in glibc.
REVIVE_EXPORT int open(const char* path, int flags, ...) {
  MODE_ARG(flags);
  return open_at(&g_openat, "openat", AT_FDCWD, path, flags, mode);
}

REVIVE_EXPORT int open64(const char* path, int flags, ...) {
  MODE_ARG(flags);
  return open_at(&g_openat64, "openat64", AT_FDCWD, path, flags, mode);
}

REVIVE_EXPORT int openat(int dir, const char* path, int flags, ...) {
  MODE_ARG(flags);
  return open_at(&g_openat, "openat", dir, path, flags, mode);
}

REVIVE_EXPORT int openat64(int dir, const char* path, int flags, ...) {
  MODE_ARG(flags);
  return open_at(&g_openat64, "openat64", dir, path, flags, mode);
}

// Wrapper NAME(PARAMS) (one of them `path`) calling libc's with ARGS, in which real_path stands for path.
// Made again when a restore came between the translation and the call's return (the call only asks).
#define PATH_CALL(ret, fail, name, params, args)                      \
  VPID_SLOT(ret, name, params)                                        \
  REVIVE_EXPORT ret name params {                                     \
    name##_fn f = revive::plugins::next_or_enosys(&g_##name, #name);  \
    if (!f) return fail;                                              \
    for (;;) {                                                        \
      const uint32_t ep_ = vpid::epoch();                             \
      TRANSLATED(path);                                               \
      ret r = f args;                                                 \
      if (!stale(path, real_path, ep_)) return r;                     \
    }                                                                 \
  }

// fopen/fopen64: as open() for a stat/status file read ("r", "re", "rb"): a stream on the rewritten copy.
#define FOPEN_CALL(name)                                                                         \
  namespace {                                                                                    \
  using name##_fn = FILE* (*)(const char*, const char*);                                         \
  name##_fn g_##name;                                                                            \
  VPID_PRIME(g_##name, #name)                                                                    \
  }                                                                                              \
  REVIVE_EXPORT FILE* name(const char* path, const char* mode) {                                 \
    name##_fn f = next_or_enosys(&g_##name, #name);                                              \
    if (!f) return nullptr;                                                                      \
    for (;;) { /* a /proc path: made again if a restore came meanwhile (stale) */                  \
      const uint32_t ep = vpid::epoch();                                                         \
      TRANSLATED(path);                                                                          \
      if (real_path == path) break;                                                              \
      FILE* s = nullptr;                                                                         \
      int v = vpid::kNotAView;                                                                   \
      if (vpid::active() && path[0] == '/' && mode && mode[0] == 'r' && !strchr(mode, '+'))      \
        v = vpid::proc_view(path, real_path, O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0));    \
      if (v >= 0) s = stream_on(v, mode);                                                        \
      if (v == vpid::kNotAView) s = f(real_path, mode);                                          \
      if (!stale(path, real_path, ep)) return s;                                                 \
      if (s) fclose(s);                                                                          \
    }                                                                                            \
    TRANSLATED(path);                                                                            \
    revive::plugins::pre_fopen(path, mode); /* glibc's fopen opens inside libc, unseen by open */ \
    const int64_t t = mode && mode[0] != 'r' ? revive::plugins::created_clock() : 0; /* may create */ \
    FILE* s = f(real_path, mode);                                                                \
    revive::plugins::created_fopen(s, path, mode, t); /* "w", "a": the creation log */           \
    return s;                                                                                    \
  }

namespace {
FILE* stream_on(int fd, const char* mode) {
  FILE* s = fdopen(fd, mode);
  if (!s) {
    const int e = errno;
    close(fd);
    errno = e;
  }
  return s;
}
}  // namespace

FOPEN_CALL(fopen)
FOPEN_CALL(fopen64)
// opendir: /proc/<pid>/task listings also get the program's tids (vpid_taskdir.cpp).
namespace {
using opendir_fn = DIR* (*)(const char*);
opendir_fn g_opendir;
VPID_PRIME(g_opendir, "opendir")
}  // namespace
REVIVE_EXPORT DIR* opendir(const char* path) {
  opendir_fn f = next_or_enosys(&g_opendir, "opendir");
  if (!f) return nullptr;
  for (;;) {  // a /proc path: made again if a restore came meanwhile (stale)
    const uint32_t ep = vpid::epoch();
    TRANSLATED(path);
    if (real_path == path) break;
    DIR* d = f(real_path);
    if (!stale(path, real_path, ep)) {
      if (d) vpid::dir_opened(path, d);
      return d;
    }
    if (d) closedir(d);
  }
  TRANSLATED(path);
  DIR* d = f(real_path);
  // Marked with or without a table: a listing begun at launch and read on after a restart with virtual
  // pids must come from one incarnation too (vpid_taskdir.cpp).
  if (d) vpid::dir_opened(path, d);
  return d;
}
PATH_CALL(int, -1, stat, (const char* path, struct stat* st), (real_path, st))
PATH_CALL(int, -1, lstat, (const char* path, struct stat* st), (real_path, st))
PATH_CALL(int, -1, stat64, (const char* path, struct stat64* st), (real_path, st))
PATH_CALL(int, -1, lstat64, (const char* path, struct stat64* st), (real_path, st))
PATH_CALL(int, -1, fstatat, (int dir, const char* path, struct stat* st, int flags), (dir, real_path, st, flags))
PATH_CALL(int, -1, fstatat64, (int dir, const char* path, struct stat64* st, int flags), (dir, real_path, st, flags))
PATH_CALL(int, -1, statx, (int dir, const char* path, int flags, unsigned int mask, struct statx* st),
          (dir, real_path, flags, mask, st))
PATH_CALL(int, -1, access, (const char* path, int mode), (real_path, mode))
PATH_CALL(int, -1, faccessat, (int dir, const char* path, int mode, int flags), (dir, real_path, mode, flags))
PATH_CALL(ssize_t, -1, readlink, (const char* path, char* out, size_t cap), (real_path, out, cap))
PATH_CALL(ssize_t, -1, readlinkat, (int dir, const char* path, char* out, size_t cap), (dir, real_path, out, cap))
