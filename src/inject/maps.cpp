// The address space as the kernel reports it: /proc/thread-self/maps into RegionRecords (engine scratch
// left out), and the mm fields of .../stat that the restarter hands to prctl(PR_SET_MM_MAP).
// thread-self, not self: /proc/self is the thread-group leader, whose files are empty once the program's
// main thread has called pthread_exit.
#include <fcntl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "inject/engine.h"
#include "inject/sys.h"
#include "plugins/vpid/vpid.h"

namespace revive::inject {
namespace {

// Reads a whole /proc file into g.text; returns its length or -errno.
long slurp(const char* path) {
  int fd = int(sys::sc(SYS_open, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return fd;
  size_t n = 0;
  for (;;) {
    if (n + 1 >= g.text_cap) break;
    long r = sys::sc(SYS_read, fd, g.text + n, g.text_cap - 1 - n);
    if (r == -4) continue;
    if (r <= 0) break;
    n += size_t(r);
  }
  sys::sc(SYS_close, fd);
  g.text[n] = 0;
  return long(n);
}

void skip_field(const char*& p) {
  while (*p && *p != ' ' && *p != '\n') ++p;
  while (*p == ' ') ++p;
}

void classify(image::RegionRecord* r, const char* perms, uint64_t ino, uint32_t dev_major, uint32_t dev_minor) {
  const char* path = r->path;
  r->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
  if (perms[3] == 's') r->flags |= image::kRegShared;
  if (sys::starts_with(path, "[vdso]") || sys::starts_with(path, "[vvar") || sys::starts_with(path, "[vsyscall]")) {
    r->flags |= image::kRegSpecial;
    return;
  }
  if (sys::starts_with(path, "[heap]")) r->flags |= image::kRegHeap;
  if (sys::starts_with(path, "[stack]")) r->flags |= image::kRegStack | image::kRegGrowsDown;
  if (sys::ends_with(path, ".rimg")) {
    // A lazy restart mapped these pages from the image: untouched ones are not "present" but hold data.
    r->flags |= image::kRegSavedAll | image::kRegFromImage;
    return;
  }
  // A shared mapping whose bytes only memory holds maps one kernel object that other processes may map
  // too: dev:inode name it (SysV: inode = shmid), so the image can store it once and restart can
  // recreate it once for all (writer.cpp, docs/image-format.md "Shared memory").
  const bool shared = r->flags & image::kRegShared;
  if (path[0] != '/' || sys::ends_with(path, " (deleted)")) {
    // Anonymous (or named anonymous), shared anonymous (/dev/zero, SysV: shown deleted), a deleted file:
    // only the memory holds the data.
    r->flags |= image::kRegSavedAll;
    if (shared && (path[0] == '/' || sys::starts_with(path, "[anon_shmem:"))) {
      r->flags |= image::kRegShmObj;
      r->dev = makedev(dev_major, dev_minor);
      r->ino = ino;
    }
    return;
  }
  struct stat st;
  if (sys::sc(SYS_stat, path, &st) != 0 || st.st_ino != ino || major(st.st_dev) != dev_major ||
      minor(st.st_dev) != dev_minor) {
    r->flags |= image::kRegSavedAll;  // replaced or unreachable: keep the bytes
    if (shared) {  // the object this mapping holds is no longer reachable by its path: like a deleted file
      r->flags |= image::kRegShmObj;
      r->dev = makedev(dev_major, dev_minor);
      r->ino = ino;
    }
    return;
  }
  r->flags |= image::kRegFile;
  r->dev = st.st_dev;
  r->ino = st.st_ino;
  r->file_size = uint64_t(st.st_size);
  r->file_mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  // POSIX shared memory is a file but rarely survives the job: keep its contents too. So for any file on
  // tmpfs mapped shared (Open MPI's shared-memory segments live in /dev/shm or its session directory
  // in /tmp): its pages are memory, gone with a reboot, and what the killed run wrote after the
  // checkpoint must not survive the restart.
  // Regular files only: a device mapped shared (a frame buffer, /dev/mem) is mapped from it again.
  struct statfs sf;
  const bool reg = S_ISREG(st.st_mode);
  const bool tmpfs = shared && reg && sys::sc(SYS_statfs, path, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
  if (sys::starts_with(path, "/dev/shm/") || tmpfs) r->flags |= image::kRegSavedAll;
  if (shared && (r->flags & image::kRegSavedAll)) r->flags |= image::kRegShmObj;
  // A file on disk mapped shared and writable (Open MPI's shared windows in its session directory when
  // /tmp is a disk): its pages go to the file, and the killed run's writes after the checkpoint would
  // survive in it. So it is an object too, stored in full up to its end: a page not in memory at the
  // checkpoint is clean there, but may be written, and written back, afterwards.
  else if (shared && reg && (r->prot & PROT_WRITE)) r->flags |= image::kRegShmObj | image::kRegSharedFileAll;
}

void note_special(image::ProcessInfo* pi, const image::RegionRecord& r) {
  if (sys::starts_with(r.path, "[vdso]")) pi->vdso_start = r.start, pi->vdso_end = r.end;
  else if (sys::starts_with(r.path, "[vvar_vclock]")) pi->vclock_start = r.start, pi->vclock_end = r.end;
  else if (sys::starts_with(r.path, "[vvar]")) pi->vvar_start = r.start, pi->vvar_end = r.end;
}

void read_stat(image::ProcessInfo* pi) {
  if (slurp("/proc/thread-self/stat") <= 0) return;
  const char* p = g.text;
  for (const char* q = g.text; *q; ++q)
    if (*q == ')') p = q + 2;  // after "pid (comm) "
  uint64_t f[64] = {0};
  for (int field = 3; field < 53 && *p; ++field) {
    const char* q = p;
    if (*q == '-') ++q;
    f[field] = sys::parse_dec(q);
    skip_field(p);
  }
  pi->start_code = f[26], pi->end_code = f[27], pi->start_stack = f[28];
  pi->start_data = f[45], pi->end_data = f[46], pi->start_brk = f[47];
  pi->arg_start = f[48], pi->arg_end = f[49], pi->env_start = f[50], pi->env_end = f[51];
  pi->brk = uint64_t(sys::sc(SYS_brk, 0));
}

}  // namespace

long read_maps(image::ProcessInfo* pi) {
  read_stat(pi);
  pi->vdso_start = pi->vdso_end = pi->vvar_start = pi->vvar_end = pi->vclock_start = pi->vclock_end = 0;
  long len = sys::sc(SYS_readlink, "/proc/thread-self/exe", pi->exe, sizeof pi->exe - 1);
  pi->exe[len > 0 ? len : 0] = 0;
  long n = slurp("/proc/thread-self/maps");
  if (n < 0) return n;
  size_t count = 0;
  for (const char* p = g.text; *p;) {
    const char* line = p;
    while (*p && *p != '\n') ++p;
    const char* eol = p;
    if (*p) ++p;
    const char* q = line;
    uint64_t start = sys::parse_hex(q);
    ++q;
    uint64_t end = sys::parse_hex(q);
    ++q;
    char perms[4] = {q[0], q[1], q[2], q[3]};
    skip_field(q);
    uint64_t off = sys::parse_hex(q);
    ++q;
    uint32_t dmaj = uint32_t(sys::parse_hex(q));
    ++q;
    uint32_t dmin = uint32_t(sys::parse_hex(q));
    while (*q == ' ') ++q;
    uint64_t ino = sys::parse_dec(q);
    while (*q == ' ') ++q;
    // The virtual-pid table belongs to this incarnation (a restart maps its own): never saved.
    uint64_t vlo = 0, vhi = 0;
    vpid::mapping(&vlo, &vhi);
    if (vlo && vlo <= start && end <= vhi) continue;
    // Cut [start, end) around engine scratch ranges (the kernel may have merged them with neighbours).
    uint64_t s = start;
    while (s < end) {
      uint64_t e = end;
      bool skip = false;
      for (uint32_t x = 0; x < g.excl_count; ++x) {
        if (g.excl[x][0] <= s && s < g.excl[x][1]) {
          s = g.excl[x][1] < end ? g.excl[x][1] : end;
          skip = true;
          break;
        }
        if (s < g.excl[x][0] && g.excl[x][0] < e) e = g.excl[x][0];
      }
      if (skip) continue;
      if (count >= g.regions_cap) return -12;
      image::RegionRecord* r = &g.regions[count++];
      sys::zero(r, sizeof *r);
      r->start = s;
      r->end = e;
      r->file_offset = off + (s - start);
      size_t plen = size_t(eol - q) < sizeof r->path - 1 ? size_t(eol - q) : sizeof r->path - 1;
      sys::copy(r->path, q, plen);
      r->path[plen] = 0;
      classify(r, perms, ino, dmaj, dmin);
      if (r->flags & image::kRegSpecial) note_special(pi, *r);
      s = e;
    }
  }
  return long(count);
}

}  // namespace revive::inject
