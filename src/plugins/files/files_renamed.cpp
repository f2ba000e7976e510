// files plugin, restore side: walked files the stopped run renamed away. The restore writes a walked file
// back at its path (files_restore.cpp), but when the stopped run did `mv out.txt old.txt` after the
// checkpoint, the saved inode still sits at old.txt, a name that did not hold it at the checkpoint: the
// restarted program would find an old.txt an uninterrupted run makes only later. The restore notes every
// entry's path and every walked entry's identity (device, inode, birth time: the inode the computation
// had at the checkpoint); after the last entry, each directory that held a walked file is read, and a
// file there that is one of those inodes under a name no entry has is moved aside into
// DIR/.revive-displaced/ (renamed, with a warning naming both paths, as files_after.cpp does for files
// born after the checkpoint). Only inodes saved as the computation's are touched: an outsider's file
// stays. Runs in the restored process with user threads held: static tables, no allocation.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/files_renamed.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

constexpr uint32_t kIdSlots = 1 << 15;    // walked identities (open addressing, at most half full)
constexpr uint32_t kPathSlots = 1 << 16;  // hashes of every entry's path
constexpr uint32_t kMaxDirs = 256;        // directories read at the end
constexpr size_t kDirBytes = 1 << 16;

// Both tables live in one anonymous mapping for the restore's duration (zero pages until used; a static
// table would stay in every later image of the process).
constexpr size_t kMapBytes = sizeof(FileIdentity) * kIdSlots + sizeof(uint64_t) * kPathSlots;
void* g_map;
FileIdentity* g_ids;  // ino 0 = empty
uint64_t* g_paths;    // 0 = empty
char g_dirs[kDirBytes];        // nul-terminated directory paths, one after another
size_t g_dir_used;
uint32_t g_ndirs, g_nids, g_npaths;
bool g_full;  // a table overflowed: the sweep is skipped (it could take a saved name for a new one)
alignas(8) char g_dents[1 << 15];

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

void note_dir(const char* path) {
  const char* slash = strrchr(path, '/');
  size_t n = slash && slash != path ? size_t(slash - path) : 1;
  for (size_t off = 0; off < g_dir_used;) {
    size_t len = strlen(g_dirs + off);
    if (len == n && memcmp(g_dirs + off, path, n) == 0) return;
    off += len + 1;
  }
  if (g_ndirs == kMaxDirs || g_dir_used + n + 1 > kDirBytes) {
    g_full = true;
    return;
  }
  memcpy(g_dirs + g_dir_used, path, n);
  g_dirs[g_dir_used + n] = '\0';
  g_dir_used += n + 1;
  ++g_ndirs;
}

// Reads one directory; moves aside each regular file that is a saved walked inode under a name no entry has.
void sweep_dir(const char* dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;  // not here (another host): nothing of the stopped run's can be in it
  int aside = -1;
  char path[PATH_MAX];
  size_t dn = strlen(dir);
  files_each_dirent(dfd, g_dents, sizeof g_dents, [&](const struct dirent64* d) {
    if (d->d_type != DT_REG && d->d_type != DT_UNKNOWN) return true;
    size_t nn = strlen(d->d_name);
    if (dn + 1 + nn >= sizeof path) return true;
    size_t at = dn == 1 ? 0 : dn;  // dir "/" : "/name"
    memcpy(path, dir, at);
    path[at] = '/';
    memcpy(path + at + 1, d->d_name, nn + 1);
    if (path_known(fnv(path, at + 1 + nn))) return true;  // a saved name: written back by its entry
    struct statx sx;
    if (syscall(SYS_statx, dfd, d->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_INO | STATX_BTIME,
                &sx) != 0 || !S_ISREG(sx.stx_mode) || !(sx.stx_mask & STATX_BTIME))
      return true;
    if (id_saved(makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino, sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec))
      files_move_aside(dfd, dir, d->d_name, &aside,
                       "a file of the computation's that the stopped run renamed there after the checkpoint");
    return true;
  });
  if (aside >= 0) close(aside);
  close(dfd);
}

}  // namespace

void renamed_begin() {
  g_dir_used = 0;
  g_ndirs = g_nids = g_npaths = 0;
  g_map = mmap(nullptr, kMapBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_full = g_map == MAP_FAILED;
  if (g_full) {
    g_map = nullptr;
    return;
  }
  g_ids = static_cast<FileIdentity*>(g_map);
  g_paths = reinterpret_cast<uint64_t*>(g_ids + kIdSlots);
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
  note_dir(path);
}

void renamed_sweep() {
  if (!g_files.displace || g_nids == 0) return;
  if (g_full) {
    warn("files: too many saved files or directories to look for walked files the stopped run renamed away; "
         "such files are left where that run put them");
    return;
  }
  for (size_t off = 0; off < g_dir_used; off += strlen(g_dirs + off) + 1) sweep_dir(g_dirs + off);
}

}  // namespace revive::plugins
