// files plugin: files the killed run created after the checkpoint. A restart goes back to the checkpoint,
// but the files the computation created after it are still there -- make's half-written f26.o, created
// by an `as` that was killed, is newer than f26.c, so the restarted make skips it and the link fails.
// The launch root lists its working directory's regular files (and symlinks) at checkpoint time, and so does every
// other process of the launch whose working directory lies below the launch's (make -C sub; a child
// that chdir'ed into its own work area; each such process lists its own, so several may list one
// directory, and at restore the first to look moves a file aside); at restore, a regular
// file (or symlink) there that is not in the list and was born (statx btime) after the listing is moved into
// DIR/.revive-displaced/ (renamed, never deleted: it may be a user's file) with a warning naming both
// paths. REVIVE_FILES_AFTER=keep turns this off. Files that existed at the checkpoint and were changed
// after it without being open at the checkpoint come back from their pre-images (files_pre.cpp).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/proc_fds.h"
#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

char g_list[kMaxListing];            // u32 length + name, repeated
alignas(8) char g_dents[1 << 15];

// Open-addressing set of the listed names (offsets into g_list), rebuilt per restore.
constexpr uint32_t kSlots = 1 << 16;
uint32_t g_slot[kSlots];  // offset + 1; 0 = empty

uint32_t hash(const char* s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(s[i])) * 16777619u;
  return h;
}

bool listed(const char* name) {
  size_t n = strlen(name);
  for (uint32_t i = hash(name, n) & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    if (g_slot[i] == 0) return false;
    uint32_t off = g_slot[i] - 1, len;
    memcpy(&len, g_list + off, sizeof len);
    if (len == n && memcmp(g_list + off + sizeof len, name, n) == 0) return true;
  }
}

// Whether any process we can see has (dev, ino) open: `revive restart >restart.log` in the working
// directory is created after the checkpoint too, and must stay where the user put it.
int g_fds[4096];
alignas(8) char g_procs[1 << 14];

bool open_anywhere(dev_t dev, ino_t ino) {
  int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return true;  // cannot tell: leave the file alone
  bool found = false;
  for (;;) {
    long got = syscall(SYS_getdents64, proc, g_procs, sizeof g_procs);
    if (got <= 0) break;
    for (long pos = 0; pos < got && !found;) {
      auto* d = reinterpret_cast<struct dirent64*>(g_procs + pos);
      pos += d->d_reclen;
      uint32_t pid = 0;
      const char* c = d->d_name;
      for (; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + uint32_t(*c - '0');
      if (*c || pid == 0) continue;
      int n = list_fds(pid, g_fds, 4096);
      for (int k = 0; k < n && !found; ++k) {
        char link[64];
        Msg(link, sizeof link).s("/proc/").u(pid).s("/fd/").i(g_fds[k]);
        struct stat st;
        found = syscall(SYS_newfstatat, AT_FDCWD, link, &st, 0) == 0 && st.st_dev == dev && st.st_ino == ino;
      }
    }
    if (found) break;
  }
  close(proc);
  return found;
}

// A regular file or a symbolic link: the names the listing keeps and the sweep moves. A symlink the stopped
// run made after the checkpoint (`ln -s`, python's os.symlink before renaming it over a file) blocks the
// restarted program's own symlink() of that name with EEXIST, as a leftover regular file shadows a rebuild.
bool listable_at(int dirfd, const struct dirent64* d) {
  if (d->d_type == DT_REG || d->d_type == DT_LNK) return true;
  if (d->d_type != DT_UNKNOWN) return false;
  struct stat st;
  return fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));
}

// Whether `path` lies strictly below directory `dir` (both absolute, no trailing '/' but for "/").
bool below(const char* path, const char* dir) {
  size_t n = strlen(dir);
  if (n == 0) return false;
  if (n == 1) return path[1] != '\0';  // below "/": anything but "/"
  return strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] != '\0';
}

}  // namespace

int files_move_aside(int dfd, const char* dir, const char* name, int* aside, const char* why) {
  char line[2 * PATH_MAX + 300];
  if (*aside < 0) {
    if (mkdirat(dfd, kDisplacedDir, 0700) != 0 && errno != EEXIST) return -errno;
    *aside = openat(dfd, kDisplacedDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*aside < 0) return -errno;
  }
  char to[NAME_MAX + 32];
  int rc = -1;
  for (int k = 0; k < 100 && rc != 0; ++k) {
    Msg m(to, sizeof to);
    m.s(name);
    if (k) m.s(".").i(k);
    rc = int(syscall(SYS_renameat2, dfd, name, *aside, to, RENAME_NOREPLACE));
    if (rc != 0 && errno != EEXIST) break;
  }
  if (rc != 0) return -errno;
  warn(Msg(line, sizeof line).s("moved '").s(dir).s("/").s(name).s("' to '").s(dir).s("/").s(kDisplacedDir)
      .s("/").s(to).s("': ").s(why).s(" (REVIVE_FILES_AFTER=keep leaves such files)").c_str());
  return 0;
}

int files_list_cwd(Out& out) {
  char path[PATH_MAX];
  ssize_t pl = readlink("/proc/self/cwd", path, sizeof path - 1);
  if (pl <= 0) return 0;
  path[pl] = '\0';
  if (path[0] != '/') return 0;  // "(unreachable)" cwd: nothing to list
  // Another process: its directory when it lies below the launch's (the root lists that one itself). Not
  // elsewhere: a daemon's "/" or a home directory collects other programs' new files, which must stay.
  if (!g_files.root && !below(path, g_files.launch_cwd)) return 0;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int dir = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  size_t used = 0;
  bool full = false;
  files_each_dirent(dir, g_dents, sizeof g_dents, [&](const struct dirent64* d) {
    if (!listable_at(dir, d)) return true;
    uint32_t n = uint32_t(strlen(d->d_name));
    if (used + sizeof n + n > sizeof g_list) {
      full = true;
      return false;
    }
    memcpy(g_list + used, &n, sizeof n);
    memcpy(g_list + used + sizeof n, d->d_name, n);
    used += sizeof n + n;
    return true;
  });
  close(dir);
  if (full) {
    char line[PATH_MAX + 160];
    warn(Msg(line, sizeof line).s("working directory '").s(path).s("' has too many files to list (over 1 MiB of "
        "names): files created there after this checkpoint are left in place by a restart").c_str());
    return 0;
  }
  FileEntry e{};
  e.origin = uint32_t(FileOrigin::kListing);
  e.size = int64_t(used);
  e.mtime_sec = now.tv_sec;
  e.mtime_nsec = now.tv_nsec;
  out.bytes(&e, sizeof e);
  out.str(path, size_t(pl));
  out.bytes(g_list, used);
  return out.ok() ? 0 : -ENOMEM;
}

int files_displace(In& in, const FileEntry& e, const char* dir, char* msg, size_t cap) {
  char line[2 * PATH_MAX + 200];
  if (!in.bytes(g_list, size_t(e.size))) {
    return fail(msg, cap, Msg(line, sizeof line).s("files section: truncated listing of '").s(dir).s("'"), EINVAL);
  }
  memset(g_slot, 0, sizeof g_slot);
  uint32_t count = 0;
  for (size_t off = 0; off < size_t(e.size);) {
    uint32_t n;
    if (off + sizeof n > size_t(e.size)) return fail(msg, cap, Msg(line, sizeof line).s("files section: malformed listing"), EINVAL);
    memcpy(&n, g_list + off, sizeof n);
    if (n == 0 || n > NAME_MAX || off + sizeof n + n > size_t(e.size) || ++count > kSlots / 2) {
      return fail(msg, cap, Msg(line, sizeof line).s("files section: malformed listing of '").s(dir).s("'"), EINVAL);
    }
    uint32_t i = hash(g_list + off + sizeof n, n) & (kSlots - 1);
    while (g_slot[i] != 0) i = (i + 1) & (kSlots - 1);
    g_slot[i] = uint32_t(off) + 1;
    off += sizeof n + n;
  }
  if (!g_files.displace) return 0;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;  // the directory is not here (another host without it): nothing to move
  int aside = -1;
  files_each_dirent(dfd, g_dents, sizeof g_dents, [&](const struct dirent64* d) {
    if (!listable_at(dfd, d) || listed(d->d_name)) return true;
    struct statx sx;
    if (syscall(SYS_statx, dfd, d->d_name, AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_INO, &sx) != 0 ||
        !(sx.stx_mask & STATX_BTIME))
      return true;  // birth time unknown: cannot tell it from a file of the checkpoint's time
    bool after = sx.stx_btime.tv_sec > e.mtime_sec ||
                 (sx.stx_btime.tv_sec == e.mtime_sec && int64_t(sx.stx_btime.tv_nsec) > e.mtime_nsec);
    if (after && !open_anywhere(makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino))
      files_move_aside(dfd, dir, d->d_name, &aside, "created after the checkpoint by the run that was stopped");
    return true;
  });
  if (aside >= 0) close(aside);
  close(dfd);
  return 0;
}

}  // namespace revive::plugins
