// ftw/nftw (and their 64 variants) of a /proc tree while a virtual-pid table is mapped. glibc's walkers
// read directories and stat entries with internal calls that no wrapper sees, so a walk of /proc or
// /proc/<pid>/task listed the kernel's ids and could not enter /proc/<virtual pid>. Under /proc this walk
// does the same job through the plugin's own wrappers (opendir/readdir give task and /proc listings the
// program's ids, the stat family translates /proc/<pid> paths); every other walk is glibc's.
//
// Written here, not borrowed: no libc exposes a walker over caller-supplied directory operations (fts
// has no hooks either). Semantics follow POSIX and glibc's extensions: FTW_PHYS, FTW_MOUNT, FTW_CHDIR,
// FTW_DEPTH, FTW_ACTIONRETVAL; FTW_SL/FTW_SLN; trailing slashes of the root dropped; without FTW_PHYS a
// directory already walked (a symlink loop, /proc/self) is not entered again; with FTW_CHDIR the root is
// reported from its parent directory. tests/vpid/ftw_test.cpp compares every callback with glibc's. Each directory's
// entries are read whole before any is visited, so one descriptor is open at a time (`nopenfd` is
// honoured trivially) and /proc's churn during the walk cannot cut a listing short.
// Runs in the program's own call (never a signal handler): malloc is fine, as in glibc's walker.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_ftw.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

using NftwFn = int (*)(const char*, const struct stat*, int, struct FTW*);
using FtwFn = int (*)(const char*, const struct stat*, int);
using Nftw64Fn = int (*)(const char*, const struct stat64*, int, struct FTW*);
using Ftw64Fn = int (*)(const char*, const struct stat64*, int);
using LibcNftw = int (*)(const char*, NftwFn, int, int);
using LibcFtw = int (*)(const char*, FtwFn, int);
using LibcNftw64 = int (*)(const char*, Nftw64Fn, int, int);
using LibcFtw64 = int (*)(const char*, Ftw64Fn, int);
LibcNftw g_nftw;
LibcFtw g_ftw;
LibcNftw64 g_nftw64;
LibcFtw64 g_ftw64;
VPID_PRIME(g_nftw, "nftw")
VPID_PRIME(g_nftw64, "nftw64")
VPID_PRIME(g_ftw, "ftw")
VPID_PRIME(g_ftw64, "ftw64")

// On this ABI struct stat and struct stat64 are one layout (glibc makes nftw64 an alias of nftw).
static_assert(sizeof(struct stat) == sizeof(struct stat64));

bool under_proc(const char* p) {
  return vpid::active() && p && strncmp(p, "/proc", 5) == 0 && (p[5] == 0 || p[5] == '/');
}

struct DevIno {
  dev_t dev;
  ino_t ino;
};

int dev_ino_cmp(const void* a, const void* b) {
  const auto* x = static_cast<const DevIno*>(a);
  const auto* y = static_cast<const DevIno*>(b);
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  return x->ino < y->ino ? -1 : x->ino > y->ino ? 1 : 0;
}

// FTW_CHDIR: into `dir`, the old working directory kept in *cwd. open (the plugin's: /proc/<virtual pid>
// translated) and fchdir, since chdir itself is not wrapped. False with errno set, nothing kept.
bool enter(const char* dir, int* cwd) {
  *cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int here = *cwd >= 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  const bool in = here >= 0 && fchdir(here) == 0;
  const int e = errno;
  if (here >= 0) close(here);
  if (!in && *cwd >= 0) close(*cwd);
  if (!in) *cwd = -1;
  errno = e;
  return in;
}

// Back to the working directory enter() kept (none: cwd < 0); the walk's result r, or -1 if that fails.
int leave(int cwd, int r) {
  if (cwd < 0) return r;
  const int e = errno;
  if (fchdir(cwd) != 0 && r == 0)
    r = -1;
  else
    errno = e;
  close(cwd);
  return r;
}

struct Walk {
  NftwFn fn = nullptr;     // nftw's callback, or
  FtwFn ftw_fn = nullptr;  // ftw's (no struct FTW; FTW_SL/FTW_SLN/FTW_DP reported as ftw does)
  int flags = 0;
  dev_t dev = 0;         // the root's (FTW_MOUNT)
  char* path = nullptr;  // the current path, grown as needed
  size_t cap = 0;
  void* seen = nullptr;  // tsearch tree of the directories walked (without FTW_PHYS: loops, /proc/self)

  bool reserve(size_t n) {
    if (n <= cap) return true;
    size_t c = cap ? cap : 256;
    while (c < n) c *= 2;
    char* p = static_cast<char*>(realloc(path, c));
    if (!p) return false;
    path = p;
    cap = c;
    return true;
  }

  int call(const struct stat* st, int type, int base, int level) {
    if (ftw_fn) {
      // ftw: a symlink is reported as what it names, a dangling one as unstattable, FTW_DP never occurs.
      if (type == FTW_SL)
        type = FTW_F;
      else if (type == FTW_SLN)
        type = FTW_NS;
      return ftw_fn(path, st, type);
    }
    struct FTW f = {base, level};
    return fn(path, st, type, &f);
  }

  // The callback's value as the walk sees it: 0 go on; FTW_SKIP_SUBTREE / FTW_SKIP_SIBLINGS (only with
  // FTW_ACTIONRETVAL); anything else ends the walk with that value.
  int outcome(int r) const {
    if (!(flags & FTW_ACTIONRETVAL)) return r;
    return r == FTW_CONTINUE ? 0 : r;
  }

  // Without FTW_PHYS a directory is entered once (as glibc's "known objects"): false if it was already,
  // or on ENOMEM (errno set, *err true).
  bool first_visit(const struct stat& st, bool* err);

  // path[0..len) names an object; its name starts at `base`. Returns 0 to go on, a skip code, or the
  // walk's end value (-1 with errno on our own failure).
  int visit(size_t len, int base, int level);
  int walk_dir(size_t len, int base, int level, const struct stat& st);
};

int Walk::visit(size_t len, int base, int level) {
  struct stat st;
  int type;
  const bool phys = flags & FTW_PHYS;
  if ((phys ? lstat(path, &st) : stat(path, &st)) == 0) {
    if (S_ISDIR(st.st_mode))
      type = FTW_D;
    else if (S_ISLNK(st.st_mode))
      type = FTW_SL;
    else
      type = FTW_F;
  } else if (!phys && errno == ENOENT && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    type = FTW_SLN;
  } else {
    if (level == 0) return -1;  // as glibc: nothing can be said of the root
    memset(&st, 0, sizeof st);
    type = FTW_NS;
  }
  if (level > 0 && (flags & FTW_MOUNT) && type != FTW_NS && st.st_dev != dev) return 0;
  if (level == 0) dev = st.st_dev;
  if (type != FTW_D) return outcome(call(&st, type, base, level));
  if (!phys) {
    bool err = false;
    if (!first_visit(st, &err)) return err ? -1 : 0;  // walked already (a loop, a link to one seen)
  }
  return walk_dir(len, base, level, st);
}

int Walk::walk_dir(size_t len, int base, int level, const struct stat& st) {
  DIR* d = opendir(path);  // the plugin's: a /proc or task listing gets the program's ids
  if (!d) return outcome(call(&st, FTW_DNR, base, level));
  if (!(flags & FTW_DEPTH)) {
    int r = outcome(call(&st, FTW_D, base, level));
    if (r == FTW_SKIP_SUBTREE) {
      closedir(d);
      return 0;
    }
    if (r != 0) {
      closedir(d);
      return r;
    }
  }
  // The whole listing first (names packed, NUL-separated): one descriptor open at a time.
  char* names = nullptr;
  size_t used = 0, room = 0;
  int err = 0;
  for (struct dirent64* e; (errno = 0, e = readdir64(d)) != nullptr;) {
    const char* n = e->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    const size_t k = strlen(n) + 1;
    if (used + k > room) {
      size_t c = room ? 2 * room : 1024;
      while (c < used + k) c *= 2;
      char* p = static_cast<char*>(realloc(names, c));
      if (!p) {
        err = ENOMEM;
        break;
      }
      names = p;
      room = c;
    }
    memcpy(names + used, n, k);
    used += k;
  }
  if (!err && errno) err = errno;
  closedir(d);
  if (err) {
    free(names);
    errno = err;
    return -1;
  }
  int cwd = -1;
  if ((flags & FTW_CHDIR) && !enter(path, &cwd)) {
    free(names);
    return -1;
  }
  int r = 0;
  for (size_t at = 0; r == 0 && at < used;) {
    const char* n = names + at;
    const size_t k = strlen(n);
    at += k + 1;
    if (!reserve(len + 1 + k + 1)) {
      r = -1;
      errno = ENOMEM;
      break;
    }
    path[len] = '/';
    memcpy(path + len + 1, n, k + 1);
    r = visit(len + 1 + k, int(len + 1), level + 1);
    path[len] = 0;
    if (r == FTW_SKIP_SUBTREE) r = 0;  // said of an entry that is no directory: nothing to skip
    if (r == FTW_SKIP_SIBLINGS) {
      r = 0;
      break;
    }
  }
  free(names);
  // FTW_DEPTH: reported from inside the directory (FTW_CHDIR), as glibc does; FTW_SKIP_SIBLINGS then
  // still skips the rest of its parent's entries, FTW_SKIP_SUBTREE has nothing left to skip.
  if (r == 0 && (flags & FTW_DEPTH)) {
    r = outcome(call(&st, FTW_DP, base, level));
    if (r == FTW_SKIP_SUBTREE) r = 0;
  }
  return leave(cwd, r);
}

bool Walk::first_visit(const struct stat& st, bool* err) {
  auto* key = static_cast<DevIno*>(malloc(sizeof(DevIno)));
  if (!key) {
    *err = true;
    errno = ENOMEM;
    return false;
  }
  *key = {st.st_dev, st.st_ino};
  void* node = tsearch(key, &seen, dev_ino_cmp);
  if (!node) {
    free(key);
    *err = true;
    errno = ENOMEM;
    return false;
  }
  if (*static_cast<DevIno**>(node) == key) return true;
  free(key);  // already there
  return false;
}

}  // namespace

namespace revive::vpid {

// The walk from `root`, for nftw (fn) or ftw (ftw_fn).
int walk_tree(const char* root, NftwFn fn, FtwFn ftw_fn, int flags) {
  Walk w;
  w.fn = fn;
  w.ftw_fn = ftw_fn;
  w.flags = flags;
  size_t len = strlen(root);
  while (len > 1 && root[len - 1] == '/') --len;  // "/proc/" is walked as "/proc", as glibc does
  if (!w.reserve(len + 1)) {
    errno = ENOMEM;
    return -1;
  }
  memcpy(w.path, root, len);
  w.path[len] = 0;
  int base = 0;
  for (size_t i = 0; i < len; ++i)
    if (w.path[i] == '/' && i + 1 < len) base = int(i + 1);
  // FTW_CHDIR: the root is reported from the directory that holds it, as glibc does.
  int cwd = -1;
  if ((flags & FTW_CHDIR) && base > 0) {
    const char keep = w.path[base];
    w.path[base] = 0;
    const bool in = enter(w.path, &cwd);
    w.path[base] = keep;
    if (!in) {
      free(w.path);
      return -1;
    }
  }
  int r = leave(cwd, w.visit(len, base, 0));
  if ((flags & FTW_ACTIONRETVAL) && (r == FTW_SKIP_SUBTREE || r == FTW_SKIP_SIBLINGS)) r = 0;
  const int e = errno;
  free(w.path);
  tdestroy(w.seen, free);
  errno = e;
  return r;
}

}  // namespace revive::vpid

namespace {
using revive::vpid::walk_tree;
}  // namespace

REVIVE_EXPORT int nftw(const char* path, NftwFn fn, int nopenfd, int flags) {
  if (under_proc(path)) return walk_tree(path, fn, nullptr, flags);
  LibcNftw f = next_or_enosys(&g_nftw, "nftw");
  return f ? f(path, fn, nopenfd, flags) : -1;
}

REVIVE_EXPORT int nftw64(const char* path, Nftw64Fn fn, int nopenfd, int flags) {
  if (under_proc(path)) return walk_tree(path, reinterpret_cast<NftwFn>(fn), nullptr, flags);
  LibcNftw64 f = next_or_enosys(&g_nftw64, "nftw64");
  return f ? f(path, fn, nopenfd, flags) : -1;
}

REVIVE_EXPORT int ftw(const char* path, FtwFn fn, int nopenfd) {
  if (under_proc(path)) return walk_tree(path, nullptr, fn, 0);
  LibcFtw f = next_or_enosys(&g_ftw, "ftw");
  return f ? f(path, fn, nopenfd) : -1;
}

REVIVE_EXPORT int ftw64(const char* path, Ftw64Fn fn, int nopenfd) {
  if (under_proc(path)) return walk_tree(path, nullptr, reinterpret_cast<FtwFn>(fn), 0);
  LibcFtw64 f = next_or_enosys(&g_ftw64, "ftw64");
  return f ? f(path, fn, nopenfd) : -1;
}
