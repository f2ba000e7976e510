// files plugin, restore side: walked files the stopped run renamed away, and node-local files it made,
// after the checkpoint. The restore writes a walked file back at its path (files_restore.cpp), but when
// the stopped run did `mv out.txt old.txt` or `mv out.txt archive/7/out.txt` after the checkpoint, the
// saved inode still sits at the new name, which did not hold it at the checkpoint: the restarted program
// would find a file an uninterrupted run makes only later; so would it find the out.txt that run wrote
// after the checkpoint and moved on. The restore notes every entry's path and every identity an entry
// carries (walked files, and since version 4 open ones: device, inode, birth time, the inode the
// computation had at the checkpoint); after the last entry the launch root walks the node-local
// directories as the checkpoint's scan does (files_scan.cpp: the roots, and only directories modified
// since the launch -- a rename into a directory modifies it), and a regular file there under a name no
// entry has is moved aside into its directory's .revive-displaced/ (renamed, with a warning naming both
// paths, as files_after.cpp does in the working directory) when it is one of those inodes, or when it was
// born after the checkpoint's moment (saved in the section's end entry) and the creation log names it as
// the computation's. An outsider's file stays. Then, deepest first, a directory the stopped run made after
// the checkpoint (the log's directory records) is moved aside whole once nothing but what was moved aside
// is left in it (sweep_dir). Cost: one walk like a checkpoint's (75 ms for 6300
// directories here), a path hash per regular file and a statx per one whose path no entry has; the
// creation log is read once, only if a file born after the checkpoint is met. Not searched: anything
// outside the node-local roots (walked files live only there; an open file renamed elsewhere stays),
// directories the walk does not enter (not modified since the launch, deeper than 12 levels, past 20000),
// .revive-displaced/. Runs in the restored process with user threads held: no allocation.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/files_pre.h"
#include "plugins/files/files_renamed.h"
#include "plugins/files/preimage_record.h"
#include "plugins/plugins.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace revive::plugins {
namespace {

constexpr uint32_t kIdSlots = 1 << 15;    // saved identities (open addressing, at most half full)
constexpr uint32_t kPathSlots = 1 << 16;  // hashes of every entry's path

// Both tables live in one anonymous mapping for the restore's duration (zero pages until used; a static
// table would stay in every later image of the process).
// The renames log's files to look at (renamed_logged): by identity, the hash of the first name the log gives
// it (its name at the checkpoint) and where its last record starts (+ 1; 0 = empty slot).
struct Logged {
  uint64_t dev, ino;
  int64_t btime_sec;
  uint64_t btime_nsec;
  uint64_t first_from;
  uint64_t last_off;
};
constexpr uint32_t kLogSlots = 1 << 14;
constexpr size_t kRecBytes = sizeof(PreRename) + 2 * PATH_MAX + 8;  // one record, read whole
constexpr size_t kMapBytes = sizeof(FileIdentity) * kIdSlots + sizeof(uint64_t) * kPathSlots +
                             sizeof(Logged) * kLogSlots + kRecBytes;
void* g_map;
FileIdentity* g_ids;  // ino 0 = empty
uint64_t* g_paths;    // 0 = empty
Logged* g_logged;
char* g_rec;
uint32_t g_nids, g_npaths;
bool g_full;  // a table overflowed: the sweep is skipped (it could take a saved name for a new one)
int64_t g_ck_ns;     // the checkpoint's moment (ns since the epoch; 0: unknown)
int64_t g_start_ns;  // when this restored process was made (ns since the epoch; 0: unknown)
bool (*g_ours)(const struct statx&);

uint64_t fnv(const char* s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(s[i])) * 1099511628211ull;
  return h ? h : 1;
}

bool path_known(uint64_t h) {
  for (uint32_t i = uint32_t(h) & (kPathSlots - 1);; i = (i + 1) & (kPathSlots - 1)) {
    if (g_paths[i] == 0) return false;
    if (g_paths[i] == h) return true;
  }
}

bool id_saved(uint64_t dev, uint64_t ino, int64_t bs, uint32_t bn) {
  for (uint32_t i = uint32_t(ino * 0x9e3779b97f4a7c15ull >> 40) & (kIdSlots - 1);; i = (i + 1) & (kIdSlots - 1)) {
    const FileIdentity& s = g_ids[i];
    if (s.ino == 0) return false;
    if (s.ino == ino && s.dev == dev && s.btime_sec == bs && s.btime_nsec == bn) return true;
  }
}

// When this process was made by the restart, on the real-time clock (0 if unknown). The root is made
// before any other process of the restart, so a file born after it is one of this restart's own (another
// process's restore recreating a file it had open, which its wrapper logs as created): never moved.
// /proc/self/stat's starttime counts clock ticks since boot, rounded down: a moment a little early.
int64_t started_ns() {
  static char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');  // after the command name, which may hold spaces
  for (int field = 2; p && field < 22; ++field) p = strchr(p + 1, ' ');
  if (!p) return 0;
  uint64_t ticks = 0;
  for (++p; *p >= '0' && *p <= '9'; ++p) ticks = ticks * 10 + uint64_t(*p - '0');
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec real, boot;
  if (hz <= 0 || clock_gettime(CLOCK_REALTIME, &real) != 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return 0;
  int64_t since_boot = int64_t(ticks / uint64_t(hz)) * 1000000000 + int64_t(ticks % uint64_t(hz)) * (1000000000 / hz);
  int64_t boot_ns = boot.tv_sec * 1000000000 + boot.tv_nsec;
  return real.tv_sec * 1000000000 + real.tv_nsec - (boot_ns - since_boot);
}

// One regular file of the walk: moved aside when it is a saved walked inode under a name no entry has.
int sweep_file(void*, int dfd, const char* path, const char* name) {
  if (path_known(fnv(path, strlen(path)))) return 0;  // a saved name: written back by its entry
  struct statx sx;
  if (syscall(SYS_statx, dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
              STATX_TYPE | STATX_UID | STATX_INO | STATX_BTIME, &sx) != 0 ||
      !S_ISREG(sx.stx_mode) || !(sx.stx_mask & STATX_BTIME))
    return 0;
  const char* why = "a file of the computation's that the stopped run renamed there after the checkpoint";
  if (!id_saved(makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino, sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec)) {
    // Not a saved one: moved too when born after the checkpoint and named by the creation log (the
    // stopped run made it then: `mv out.txt archive/7/` of an out.txt written after the checkpoint).
    // Strictly after: the kernel's coarse clock only dates a file earlier than it was made. Before this
    // restart's processes were made: not one of its own.
    int64_t born = sx.stx_btime.tv_sec * 1000000000 + sx.stx_btime.tv_nsec;
    if (g_ck_ns == 0 || born <= g_ck_ns || born >= g_start_ns || !g_ours(sx)) return 0;
    why = "created by the run that was stopped after the checkpoint";
  }
  char dir[PATH_MAX];
  size_t dn = strlen(path) - strlen(name) - 1;  // path is dir + "/" + name ("" + "/name" below "/")
  memcpy(dir, path, dn);
  dir[dn] = '\0';
  int aside = -1;  // one directory's .revive-displaced/ per file moved: such files are few
  files_move_aside(dfd, dir, name, &aside, why);
  if (aside >= 0) close(aside);
  return 0;
}

// One directory the walk has been through (deepest first): moved aside, whole, into its parent's
// .revive-displaced/ when the stopped run made it after the checkpoint (born after the checkpoint's
// moment and before this restart's processes, named by the creation log as a directory the computation
// made) and it now holds nothing but what this sweep moved aside (its .revive-displaced/; a directory of
// its own moved already sits there). An uninterrupted run would not have it yet: `mkdir -p archive/$i`
// or a count of directories would differ. Anything else inside keeps it: a file written back there by an
// entry (the stopped run removed and made the directory again: it is the checkpoint's) silently, anything
// else (not the computation's, or not found to be) with a warning naming it.
int sweep_dir(void*, int dfd, const char* path, const char* name) {
  struct statx sx;
  if (syscall(SYS_statx, dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
              STATX_TYPE | STATX_UID | STATX_INO | STATX_BTIME, &sx) != 0 ||
      !S_ISDIR(sx.stx_mode) || !(sx.stx_mask & STATX_BTIME))
    return 0;
  int64_t born = sx.stx_btime.tv_sec * 1000000000 + sx.stx_btime.tv_nsec;
  if (g_ck_ns == 0 || born <= g_ck_ns || born >= g_start_ns || !g_ours(sx)) return 0;
  int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return 0;
  alignas(8) char dents[2048];
  char other[NAME_MAX + 1] = "";
  bool saved = false;  // holds a path an entry wrote back
  const size_t pn = strlen(path);
  char inner[PATH_MAX];
  files_each_dirent(sub, dents, sizeof dents, [&](const struct dirent64* d) {
    const char* n = d->d_name;
    if ((n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) || strcmp(n, kDisplacedDir) == 0) return true;
    size_t nl = strlen(n);
    if (pn + 1 + nl < sizeof inner) {
      memcpy(inner, path, pn);
      inner[pn] = '/';
      memcpy(inner + pn + 1, n, nl + 1);
      if (path_known(fnv(inner, pn + 1 + nl))) {
        saved = true;
        return false;
      }
    }
    if (!other[0]) memcpy(other, n, nl + 1);
    return true;
  });
  close(sub);
  if (saved) return 0;
  char line[2 * PATH_MAX + 200];
  if (other[0]) {
    warn(Msg(line, sizeof line).s("files: left directory '").s(path).s("', made by the stopped run after the "
        "checkpoint: it holds '").s(other).s("', which the restore did not move aside (not the computation's, "
        "or not known to be)").c_str());
    return 0;
  }
  char dir[PATH_MAX];
  size_t dn = pn - strlen(name) - 1;
  memcpy(dir, path, dn);
  dir[dn] = '\0';
  int aside = -1;
  files_move_aside(dfd, dir, name, &aside, "a directory the run that was stopped made after the checkpoint");
  if (aside >= 0) close(aside);
  return 0;
}

// The log's record at `off` read whole into g_rec, checked; nullptr, or why it cannot be read.
const char* read_rename(int fd, uint64_t off, const char* torn) {
  PreRename r;
  long got = pread(fd, &r, sizeof r, off_t(off));
  if (got != long(sizeof r)) return torn;
  if (memcmp(r.magic, kPreRenameMagic, sizeof r.magic) != 0) return "not a renames record (bad magic)";
  if (r.from_len == 0 || r.to_len == 0 || r.from_len >= PATH_MAX || r.to_len >= PATH_MAX ||
      r.size != sizeof r + r.from_len + r.to_len)
    return "a record's lengths are wrong";
  if (pread(fd, g_rec, r.size, off_t(off)) != long(r.size)) return torn;
  PreRename z = r;
  z.self_hash = 0;
  memcpy(g_rec, &z, sizeof z);
  if (XXH3_64bits(g_rec, r.size) != r.self_hash) return "a record fails its checksum (torn or overwritten)";
  memcpy(g_rec, &r, sizeof r);
  g_rec[r.size] = '\0';
  return nullptr;
}

Logged* logged_slot(const PreRename& r) {
  for (uint32_t i = uint32_t(r.ino * 0x9e3779b97f4a7c15ull >> 40) & (kLogSlots - 1), k = 0; k < kLogSlots / 2;
       i = (i + 1) & (kLogSlots - 1), ++k) {
    Logged& l = g_logged[i];
    if (l.last_off == 0) {
      l = Logged{r.dev, r.ino, r.btime_sec, uint64_t(r.btime_nsec), 0, 0};
      return &l;
    }
    if (l.ino == r.ino && l.dev == r.dev && l.btime_sec == r.btime_sec && l.btime_nsec == uint64_t(r.btime_nsec)) return &l;
  }
  return nullptr;  // more than half full: stop
}

}  // namespace

void renamed_logged(int64_t ck_sec, int64_t ck_nsec) {
  const char* pre = pre_dir();
  if (!g_files.displace || g_full || !g_map || !pre) return;
  // Files born after the checkpoint and before this restart's processes: the launch root alone (as its sweep).
  int64_t ck_ns = ck_sec > 0 && ck_nsec >= 0 && ck_nsec < 1000000000 ? ck_sec * 1000000000 + ck_nsec : 0;
  int64_t start_ns = g_files.root && ck_ns ? started_ns() : 0;
  if (g_nids == 0 && start_ns == 0) return;
  char log[1400];
  Msg(log, sizeof log).s(pre).s("/").s(kPreRenames);
  int fd = open(log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;  // no file was renamed since the checkpoint
  char line[PATH_MAX + 400];
  const char* torn = "torn: ends inside a record";
  uint64_t off = 0;
  for (;;) {
    PreRename r;
    long got = pread(fd, &r, sizeof r, off_t(off));
    if (got == 0) break;
    const char* why = read_rename(fd, off, torn);
    if (why) {
      warn(Msg(line, sizeof line).s("files: renames log '").s(log).s("': ").s(why).s(" at byte ").u(off)
          .s("; files the stopped run renamed after the checkpoint, from that record on, stay under their new names").c_str());
      break;
    }
    const int64_t born = r.btime_sec * 1000000000 + r.btime_nsec;
    const bool ours = id_saved(r.dev, r.ino, r.btime_sec, uint32_t(r.btime_nsec)) ||
                      (start_ns && (r.btime_sec || r.btime_nsec) && born > ck_ns && born < start_ns);
    if (ours) {
      Logged* l = logged_slot(r);
      if (!l) {
        warn(Msg(line, sizeof line).s("files: renames log '").s(log).s("' names too many files; files the stopped "
            "run renamed after the checkpoint, from byte ").u(off).s(" on, stay under their new names").c_str());
        break;
      }
      if (l->first_from == 0) l->first_from = fnv(g_rec + sizeof r, r.from_len);
      l->last_off = off + 1;
    }
    off += r.size;
  }
  for (uint32_t i = 0; i < kLogSlots; ++i) {
    const Logged& l = g_logged[i];
    if (l.last_off == 0 || read_rename(fd, l.last_off - 1, torn)) continue;
    PreRename r;
    memcpy(&r, g_rec, sizeof r);
    const char* to = g_rec + sizeof r + r.from_len;
    const uint64_t h = fnv(to, r.to_len);
    // Back under the name it had (the first record's), a name an entry wrote back, or a name that held a
    // file the rename replaced (which may have been there at the checkpoint: `revive restart` put its
    // pre-image back into this inode, `mv new.txt f.txt`): left.
    if (h == l.first_from || path_known(h) || (r.flags & kRenameReplaced)) continue;
    struct statx sx;
    if (syscall(SYS_statx, AT_FDCWD, to, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_INO | STATX_BTIME,
                &sx) != 0 ||
        !S_ISREG(sx.stx_mode) || makedev(sx.stx_dev_major, sx.stx_dev_minor) != l.dev || sx.stx_ino != l.ino ||
        ((sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_sec != l.btime_sec || uint64_t(sx.stx_btime.tv_nsec) != l.btime_nsec
                                     : l.btime_sec || l.btime_nsec))
      continue;  // moved on (unrecorded), or another file has the name now
    const char* slash = strrchr(to, '/');
    char dir[PATH_MAX];
    size_t dn = size_t(slash - to);
    memcpy(dir, to, dn ? dn : 1);
    dir[dn ? dn : 1] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) continue;
    int aside = -1;
    files_move_aside(dfd, dn ? dir : "", slash + 1, &aside,
                     id_saved(l.dev, l.ino, l.btime_sec, uint32_t(l.btime_nsec))
                         ? "a file of the checkpoint's that the run that was stopped renamed there after it"
                         : "a file the run that was stopped made and renamed there after the checkpoint");
    if (aside >= 0) close(aside);
    close(dfd);
  }
  close(fd);
}

void renamed_begin() {
  g_nids = g_npaths = 0;
  g_map = mmap(nullptr, kMapBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_full = g_map == MAP_FAILED;
  if (g_full) {
    g_map = nullptr;
    return;
  }
  g_ids = static_cast<FileIdentity*>(g_map);
  g_paths = reinterpret_cast<uint64_t*>(g_ids + kIdSlots);
  g_logged = reinterpret_cast<Logged*>(g_paths + kPathSlots);
  g_rec = reinterpret_cast<char*>(g_logged + kLogSlots);
}

void renamed_end() {
  if (g_map) munmap(g_map, kMapBytes);
  g_map = nullptr;
}

void renamed_note(const char* path, const FileIdentity* id) {
  if (g_full) return;
  if (++g_npaths > kPathSlots / 2) {
    g_full = true;
    return;
  }
  uint64_t h = fnv(path, strlen(path));
  uint32_t i = uint32_t(h) & (kPathSlots - 1);
  while (g_paths[i] != 0 && g_paths[i] != h) i = (i + 1) & (kPathSlots - 1);
  g_paths[i] = h;
  if (!id || id->ino == 0) return;
  if (++g_nids > kIdSlots / 2) {
    g_full = true;
    return;
  }
  uint32_t k = uint32_t(id->ino * 0x9e3779b97f4a7c15ull >> 40) & (kIdSlots - 1);
  while (g_ids[k].ino != 0) k = (k + 1) & (kIdSlots - 1);
  g_ids[k] = *id;
}

void renamed_sweep(int64_t ck_sec, int64_t ck_nsec, bool (*ours)(const struct statx&)) {
  // The process that walked at the checkpoint (its host's walker, files_walker.cpp) sweeps: it alone holds
  // walked entries.
  if (!g_files.displace || !files_walked() || !g_files.local[0]) return;
  g_ck_ns = ck_sec > 0 && ck_nsec >= 0 && ck_nsec < 1000000000 ? ck_sec * 1000000000 + ck_nsec : 0;
  g_ours = ours;
  g_start_ns = started_ns();
  if (g_start_ns == 0) g_ck_ns = 0;  // cannot tell the stopped run's files from this restart's
  if (g_nids == 0 && g_ck_ns == 0) return;
  if (g_full) {
    warn("files: too many saved files to look for walked files the stopped run renamed away; "
         "such files are left where that run put them");
    return;
  }
  files_walk_local(sweep_file, nullptr, true,
                   "walked files the stopped run renamed below it are left where that run put them", sweep_dir);
}

}  // namespace revive::plugins
