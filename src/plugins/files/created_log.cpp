// The creation log (created_log.h): the writer side the libc wrappers call, and the reader the launch
// root's walk uses.
//
// Cost, and why the log is opened for every record: a record costs open + write + close of the log (about
// 3 us here) plus one statx of the new file, only for a call that may create (O_CREAT, fopen "w"/"a"/"x",
// creat, the mkstemp family) a file in a node-local directory; opens without O_CREAT pay nothing. Keeping
// the log open instead would put a descriptor of ours into every program (closed by programs that close
// all descriptors, inherited across fork and exec, saved by the fd plugin). Which files: an absolute path
// is checked against REVIVE_LOCAL_DIRS by prefix; a relative one (or one under a directory descriptor) by
// its device against those directories' devices, collected once at init -- where /tmp shares the root
// file system, files created anywhere on it are recorded too, which costs log space only (the walk looks
// up only what it finds under the node-local directories).
//
// Growth: 32 bytes per file created there (a million compiler temporaries: 32 MB). The log is never
// compacted: processes of the computation append to it concurrently, at any time (a fork-mode writer
// child, a process between checkpoints), and a rewrite would lose their records without a lock the
// wrappers cannot take. It is read once per checkpoint with one private mapping, sorted in place.
#include "plugins/files/created_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "inject/sys.h"
#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace revive::plugins {
namespace {

namespace sys = inject::sys;

constexpr int kMaxLocalDevs = 16;
uint64_t g_local_devs[kMaxLocalDevs];
int g_nlocal_devs;
bool g_on;  // launched by `revive launch` (REVIVE_LAUNCH_T0): there is a computation to record for

struct KeepErrno {
  int e = errno;
  ~KeepErrno() { errno = e; }
};

uint32_t record_sum(const CreatedRecord& r) { return XXH32(&r, offsetof(CreatedRecord, sum), kCreatedSeed); }

bool log_path(char* out, size_t cap) {
  const char* dir = inject::checkpoint_dir();
  if (!dir || dir[0] != '/') return false;
  Msg m(out, cap);
  m.s(dir).s("/").s(kCreatedName);
  return m.size() + 1 < cap;
}

// A new log: written under a private name and linked into place, so no process ever appends to a log
// without its header (link fails with EEXIST when another process was first: theirs is kept).
void make_log(const char* path) {
  char tmp[PATH_MAX + 48];
  Msg(tmp, sizeof tmp).s(path).s(".").i(sys::getpid()).s(".").i(sys::gettid());
  long fd = sys::sc(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  CreatedHeader h{};
  memcpy(h.magic, kCreatedMagic, sizeof h.magic);
  h.version = kCreatedVersion;
  h.record_size = sizeof(CreatedRecord);
  long w = sys::sc(SYS_write, fd, &h, sizeof h);
  sys::sc(SYS_close, fd);
  if (w == long(sizeof h)) sys::sc(SYS_linkat, AT_FDCWD, tmp, AT_FDCWD, path, 0);
  sys::sc(SYS_unlinkat, AT_FDCWD, tmp, 0);
}

void append(const CreatedRecord& r) {
  char path[PATH_MAX];
  if (!log_path(path, sizeof path)) return;
  for (int attempt = 0; attempt < 2; ++attempt) {
    long fd = sys::sc(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      sys::sc(SYS_write, fd, &r, sizeof r);  // one write: O_APPEND keeps concurrent records whole
      sys::sc(SYS_close, fd);
      return;
    }
    if (fd != -ENOENT) return;
    make_log(path);
  }
}

bool local_dev(uint64_t dev) {
  for (int k = 0; k < g_nlocal_devs; ++k)
    if (g_local_devs[k] == dev) return true;
  return false;
}

// The file `path` names (relative to dir), or fd's when path is empty: records it when it is a new regular
// file (a directory, with is_dir) in a node-local directory.
void note(int fd, int dir, const char* path, bool fresh, int64_t t_before, bool is_dir = false) {
  if (!g_on || (fd < 0 && !path)) return;
  const bool abs = path && path[0] == '/';
  if (abs) {
    if (!files_local(path)) return;
    const char* ck = inject::checkpoint_dir();
    if (ck && ck[0] == '/' && files_under(path, ck)) return;  // revive's own files
  } else if (g_nlocal_devs == 0) {
    return;
  }
  struct statx sx;
  const unsigned mask = STATX_TYPE | STATX_INO | STATX_NLINK | STATX_BTIME;
  if ((fd >= 0 ? sys::sc(SYS_statx, fd, "", AT_EMPTY_PATH, mask, &sx)
               : sys::sc(SYS_statx, dir, path, AT_SYMLINK_NOFOLLOW, mask, &sx)) != 0)
    return;
  if (is_dir ? !S_ISDIR(sx.stx_mode) : (!S_ISREG(sx.stx_mode) || sx.stx_nlink == 0)) return;  // unlinked files are the fd plugin's
  const uint64_t dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  if (!abs && !local_dev(dev)) return;
  const bool btime = sx.stx_mask & STATX_BTIME;
  // Not certainly new (O_CREAT without O_EXCL): born since the call began. The file system's timestamps
  // come from the same coarse clock as t_before. No birth time: recorded (only log space is at stake).
  if (!fresh && btime && sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec < t_before) return;
  CreatedRecord r{};
  r.dev = dev;
  r.ino = sx.stx_ino;
  r.btime_sec = btime ? sx.stx_btime.tv_sec : 0;
  r.btime_nsec = (btime ? sx.stx_btime.tv_nsec : 0) | (is_dir ? kCreatedDirBit : 0);
  r.sum = record_sum(r);
  append(r);
}

// The loaded log: a private (copy-on-write) mapping of it, valid records first, sorted by (dev, ino).
CreatedRecord* g_recs;
size_t g_nrecs;
void* g_map;
size_t g_map_len;

bool less(const CreatedRecord& a, const CreatedRecord& b) { return a.dev != b.dev ? a.dev < b.dev : a.ino < b.ino; }

const char* g_then;  // created_load's `then`

CreatedLoad bad(const char* path, const char* why, uint64_t offset) {
  char line[PATH_MAX + 300];
  Msg m(line, sizeof line);
  m.s("creation log '").s(path).s("': ").s(why);
  if (offset != ~uint64_t(0)) m.s(" at byte ").u(offset);
  m.s("; ").s(g_then ? g_then : "this checkpoint tells the computation's node-local files by birth time instead "
      "(owner ours, born since the launch: other programs' files there are saved too)");
  warn(m.c_str());
  created_unload();
  return CreatedLoad::kBad;
}

}  // namespace

int64_t created_clock() {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0) return 0;  // 0: every file counts as new
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void created_open(int fd, int dir, const char* path, int flags, int64_t t_before) {
  if (!g_on || fd < 0 || !(flags & O_CREAT)) return;
  KeepErrno k;
  note(fd, dir, path, flags & O_EXCL, t_before);
}

void created_fopen(FILE* s, const char* path, const char* mode, int64_t t_before) {
  if (!g_on || !s || !mode || (mode[0] != 'w' && mode[0] != 'a')) return;
  KeepErrno k;
  note(fileno(s), AT_FDCWD, path, strchr(mode, 'x') != nullptr, t_before);
}

void created_path(int dir, const char* path, bool fresh, int64_t t_before) {
  if (!g_on || !path) return;
  KeepErrno k;
  note(-1, dir, path, fresh, t_before);
}

void created_dir(int dir, const char* path) {
  if (!g_on || !path) return;
  KeepErrno k;
  note(-1, dir, path, true, 0, true);  // mkdir fails on an existing name: certainly new
}

void created_init() {
  g_on = g_files.launched;
  g_nlocal_devs = 0;
  char d[1024];
  for (const char* p = g_files.local; *p && g_nlocal_devs < kMaxLocalDevs;) {
    const char* e = strchr(p, ':');
    size_t n = e ? size_t(e - p) : strlen(p);
    if (n > 0 && n < sizeof d) {
      memcpy(d, p, n);
      d[n] = '\0';
      struct stat st;
      if (stat(d, &st) == 0 && !local_dev(st.st_dev)) g_local_devs[g_nlocal_devs++] = st.st_dev;
    }
    if (!e) break;
    p = e + 1;
  }
}

CreatedLoad created_load(const char* then) {
  created_unload();
  g_then = then;
  char path[PATH_MAX];
  if (!log_path(path, sizeof path)) return CreatedLoad::kNone;
  long fd = sys::sc(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd == -ENOENT) return CreatedLoad::kNone;
  if (fd < 0) {
    char why[120];
    Msg(why, sizeof why).s("cannot open: ").err(int(-fd));
    return bad(path, why, ~uint64_t(0));
  }
  struct stat st;
  if (fstat(int(fd), &st) != 0 || !S_ISREG(st.st_mode)) {
    sys::sc(SYS_close, fd);
    return bad(path, "not a regular file", ~uint64_t(0));
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size < sizeof(CreatedHeader)) {
    sys::sc(SYS_close, fd);
    return bad(path, "shorter than its 32-byte header (torn or not a creation log)", ~uint64_t(0));
  }
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, int(fd), 0);
  sys::sc(SYS_close, fd);
  if (map == MAP_FAILED) return bad(path, "cannot be mapped", ~uint64_t(0));
  g_map = map;
  g_map_len = size;
  const auto* h = static_cast<const CreatedHeader*>(map);
  if (memcmp(h->magic, kCreatedMagic, sizeof h->magic) != 0) return bad(path, "not a creation log (bad magic)", 0);
  if (h->version != kCreatedVersion || h->record_size != sizeof(CreatedRecord))
    return bad(path, "written by another version of revive (version or record size differ)", 8);
  if ((size - sizeof(CreatedHeader)) % sizeof(CreatedRecord) != 0)
    return bad(path, "torn: ends inside a record", size - (size - sizeof(CreatedHeader)) % sizeof(CreatedRecord));
  auto* recs = reinterpret_cast<CreatedRecord*>(static_cast<char*>(map) + sizeof(CreatedHeader));
  const size_t n = (size - sizeof(CreatedHeader)) / sizeof(CreatedRecord);
  for (size_t k = 0; k < n; ++k) {
    if (recs[k].sum != record_sum(recs[k]))
      return bad(path, "a record fails its checksum (torn or overwritten)", sizeof(CreatedHeader) + k * sizeof(CreatedRecord));
  }
  std::sort(recs, recs + n, less);
  g_recs = recs;
  g_nrecs = n;
  return CreatedLoad::kOk;
}

bool created_has(uint64_t dev, uint64_t ino, int64_t btime_sec, uint32_t btime_nsec) {
  CreatedRecord key{};
  key.dev = dev;
  key.ino = ino;
  const CreatedRecord* it = std::lower_bound(g_recs, g_recs + g_nrecs, key, less);
  // The same inode may have been recorded several times (reused after a delete): any with this birth time.
  for (; it != g_recs + g_nrecs && it->dev == dev && it->ino == ino; ++it)
    if (it->btime_sec == btime_sec && it->btime_nsec == btime_nsec) return true;
  return false;
}

void created_unload() {
  if (g_map) munmap(g_map, g_map_len);
  g_map = nullptr;
  g_map_len = 0;
  g_recs = nullptr;
  g_nrecs = 0;
}

uint64_t created_count() { return g_nrecs; }

}  // namespace revive::plugins
