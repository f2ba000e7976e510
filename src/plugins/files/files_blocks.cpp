// files plugin, checkpoint side of large files (REVIVE_FILES_DELTA_MB and more): the file is cut into
// 1 MiB blocks named by their XXH3-128; the image's entry lists the hashes, the blocks are files beside
// the image (GEN/.blk-<hash>). A block some earlier checkpoint stored is not written again: it is
// hard-linked from the store DIR/.revive-blocks/<hash>, which holds one more link to every block any
// generation holds. So every generation directory owns (links) all the blocks its images need: deleting
// a generation, or a checkpoint killed half-way, never takes a block another generation needs, and there
// is no chain between generations. The store is swept at every checkpoint that uses it: an entry whose
// only link is the store's (every generation holding it was deleted) is removed.
// Runs on the checkpoint thread with user threads suspended: static tables, one mmap'ed buffer, no malloc.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>  // rename
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL  // header-only: nothing to link into the preloaded library
#include <xxhash.h>

#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"

namespace revive::inject {
// Weak defaults so the plugins link without the engine (plugin tests): no generation, no blocks.
__attribute__((weak)) const char* generation_dir() { return ""; }
}  // namespace revive::inject

namespace revive::plugins {
namespace {

// What this process stored of a large file at a checkpoint: if the file is unchanged at the next one
// (size, mtime, ctime) its hashes are reused without reading it.
struct Known {
  dev_t dev;
  ino_t ino;
  int64_t size, mt_s, mt_ns, ct_s, ct_ns;
  uint32_t first, count;  // slice of the table's pool
};
constexpr int kMaxKnown = 64;
constexpr uint32_t kPool = 32768;  // hashes: 32 GiB of large files per process get the fast path
struct Table {
  int64_t t_ns;  // CLOCK_REALTIME when that checkpoint's save began
  int n;
  uint32_t used;
  Known k[kMaxKnown];
  BlockHash pool[kPool];
};
Table g_tab[2];  // [g_cur]: this checkpoint's; the other: the previous checkpoint's
int g_cur;
char g_gen[PATH_MAX];    // this checkpoint's generation directory ("" : block saving off)
char g_store[PATH_MAX];  // DIR/.revive-blocks
char* g_buf;             // kBlockBytes, mapped while a save uses it
bool g_swept_needed;
FilesBlockStats g_stats;

// A ctime this much older than the previous save's start cannot share a coarse clock tick with a write
// made after it (the kernel's timestamps lag the real clock by at most a tick: 4 ms at HZ=250).
constexpr int64_t kTickMarginNs = 50'000'000;

// dir + "/" + prefix + hex + suffix into out (PATH_MAX).
bool name_of(char* out, const char* dir, const char* prefix, const BlockHash& h, const char* suffix) {
  char hx[33];
  files_block_hex(h, hx);
  Msg m(out, PATH_MAX);
  m.s(dir).s("/").s(prefix).s(hx).s(suffix);
  return m.size() + 1 < PATH_MAX;
}

bool same(const BlockHash& a, const BlockHash& b) { return a.lo == b.lo && a.hi == b.hi; }

// The block is already in this generation, or the store has it and now this generation links it too.
bool link_stored(const BlockHash& h) {
  char from[PATH_MAX], to[PATH_MAX];
  if (!name_of(from, g_store, "", h, "") || !name_of(to, g_gen, kBlockPrefix, h, "")) return false;
  if (linkat(AT_FDCWD, from, AT_FDCWD, to, 0) == 0 || errno == EEXIST) {
    ++g_stats.linked;
    return true;
  }
  return false;
}

int read_block(int fd, const char* path, int64_t off, size_t len) {
  for (size_t done = 0; done < len;) {
    ssize_t n = pread(fd, g_buf + done, len - done, off + int64_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      char line[PATH_MAX + 160];
      warn(Msg(line, sizeof line).s("checkpoint failed: cannot read '").s(path).s("' at ").i(off + int64_t(done))
          .s(" to save it by blocks: ").err(err).c_str());
      return -err;
    }
    done += size_t(n);
  }
  return 0;
}

// Blocks written by this save and not yet durable: flush_pending makes them so before the image is
// written (the writer then fsyncs the generation directory after renaming the image into it), and only
// then does the store link them, so a later checkpoint never links a block a power cut may have torn.
constexpr int kMaxPending = 4096;
BlockHash g_pending[kMaxPending];
int g_npending;
// Each is fdatasync'ed only here, after all were written (their writeback started at write time): the
// first fdatasync commits the journal transaction that holds every block's allocation, the others then
// wait for their data only (1024 blocks fdatasync'ed as each was written: 4.4 s on this VM's ext4).
int flush_pending() {
  char name[PATH_MAX], line[PATH_MAX + 160];
  int err = 0;
  for (int k = 0; k < g_npending && !err; ++k) {
    if (!name_of(name, g_gen, kBlockPrefix, g_pending[k], "")) continue;
    int bfd = open(name, O_RDONLY | O_CLOEXEC);
    if (bfd < 0 || fdatasync(bfd) != 0) err = errno;
    if (bfd >= 0) close(bfd);
  }
  if (err) {
    warn(Msg(line, sizeof line).s("checkpoint failed: cannot make the blocks of large files in '").s(g_gen)
        .s("' durable: ").err(err).c_str());
    g_npending = 0;
    return -err;
  }
  for (int k = 0; k < g_npending; ++k) {
    char st[PATH_MAX];
    if (name_of(name, g_gen, kBlockPrefix, g_pending[k], "") && name_of(st, g_store, "", g_pending[k], ""))
      (void)linkat(AT_FDCWD, name, AT_FDCWD, st, 0);  // EEXIST: another process stored it too
  }
  g_npending = 0;
  return 0;
}

// Writes the block in g_buf (the file's bytes [off, off+len)) as GEN/.blk-<h>: cloned from the file where
// the filesystem shares extents (FICLONERANGE: btrfs, XFS), else copied; durable and linked into the store
// by flush_pending.
int write_block(int fd, const char* path, int64_t off, size_t len, const BlockHash& h) {
  char tmp[PATH_MAX], fin[PATH_MAX], line[PATH_MAX * 2 + 160], sfx[32];
  Msg(sfx, sizeof sfx).s(".").i(getpid()).s(".tmp");  // two processes writing the same block never collide
  if (!name_of(tmp, g_gen, kBlockPrefix, h, sfx) || !name_of(fin, g_gen, kBlockPrefix, h, "")) return -ENAMETOOLONG;
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err = out < 0 ? errno : 0;
  bool cloned = false;
  if (!err) {
    struct file_clone_range r = {fd, uint64_t(off), uint64_t(len), 0};
    cloned = ioctl(out, FICLONERANGE, &r) == 0;  // EOPNOTSUPP, EXDEV, EINVAL...: copied instead
    for (size_t done = 0; !cloned && !err && done < len;) {
      ssize_t n = write(out, g_buf + done, len - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) err = n < 0 ? errno : EIO;
      else done += size_t(n);
    }
    if (!err && !cloned) (void)sync_file_range(out, 0, off_t(len), SYNC_FILE_RANGE_WRITE);  // writeback now
    close(out);
  }
  if (!err && rename(tmp, fin) != 0) err = errno;
  if (err) {
    unlink(tmp);
    warn(Msg(line, sizeof line).s("checkpoint failed: cannot store block at ").i(off).s(" of '").s(path)
        .s("' as '").s(fin).s("': ").err(err).c_str());
    return -err;
  }
  if (cloned) g_stats.cloned_bytes += int64_t(len);
  else g_stats.written_bytes += int64_t(len);
  ++g_stats.written;
  g_pending[g_npending++] = h;
  return g_npending == kMaxPending ? flush_pending() : 0;
}

// One block: `known` is its hash at the previous checkpoint when the file is unchanged since (the fast
// path: no read at all when the store still has it).
int put_block(int fd, const char* path, int64_t off, size_t len, const BlockHash* known, BlockHash* out) {
  g_swept_needed = true;
  if (known && link_stored(*known)) {
    *out = *known;
    return 0;
  }
  if (int rc = read_block(fd, path, off, len); rc != 0) return rc;
  g_stats.read_bytes += int64_t(len);
  XXH128_hash_t x = XXH3_128bits(g_buf, len);
  *out = BlockHash{x.low64, x.high64};
  if ((!known || !same(*known, *out)) && link_stored(*out)) return 0;
  return write_block(fd, path, off, len, *out);
}

const Known* previous(const struct stat& st) {
  const Table& p = g_tab[g_cur ^ 1];
  for (int k = 0; k < p.n; ++k) {
    const Known& e = p.k[k];
    if (e.dev == st.st_dev && e.ino == st.st_ino && e.size == st.st_size && e.mt_s == st.st_mtim.tv_sec &&
        e.mt_ns == st.st_mtim.tv_nsec && e.ct_s == st.st_ctim.tv_sec && e.ct_ns == st.st_ctim.tv_nsec &&
        e.ct_s * 1000000000LL + e.ct_ns < p.t_ns - kTickMarginNs)
      return &e;
  }
  return nullptr;
}

int64_t realtime_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

}  // namespace

void files_blocks_begin() {
  g_cur ^= 1;
  Table& t = g_tab[g_cur];
  t.n = 0;
  t.used = 0;
  t.t_ns = realtime_ns();
  g_stats = FilesBlockStats{};
  g_gen[0] = g_store[0] = '\0';
  g_swept_needed = false;
  g_npending = 0;
  const char* gen = inject::generation_dir();
  size_t n = gen ? strlen(gen) : 0;
  if (g_files.delta_bytes <= 0 || n == 0 || gen[0] != '/' || n + 64 >= sizeof g_gen) return;
  memcpy(g_gen, gen, n + 1);
  while (n > 1 && g_gen[n - 1] == '/') g_gen[--n] = '\0';
  const char* slash = strrchr(g_gen, '/');
  size_t dn = size_t(slash - g_gen);
  memcpy(g_store, g_gen, dn);
  g_store[dn] = '\0';
  Msg(g_store + dn, sizeof g_store - dn).s("/").s(kBlockStore);
}

bool files_blocks_on(int64_t size) { return g_gen[0] && g_files.delta_bytes > 0 && size >= g_files.delta_bytes; }

int files_put_blocks(Out& out, int fd, const char* path, int64_t size) {
  // A write through a shared mapping changes ctime only when it faults on a clean page: a page left dirty
  // and writable since before the last checkpoint takes writes silently. Starting writeback first
  // write-protects every dirty page, so any later write through a mapping sets ctime and the fast path
  // below (next checkpoint) sees it. WAIT_BEFORE: a page already under writeback (skipped by a plain
  // WRITE) may have been dirtied again; waiting for it lets WRITE take it too. The new I/O is not waited for.
  (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (!g_buf) {
    void* p = mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -ENOMEM;
    g_buf = static_cast<char*>(p);
    if (mkdir(g_store, 0700) != 0 && errno != EEXIST) {
      int e = errno;
      char line[PATH_MAX + 120];
      warn(Msg(line, sizeof line).s("checkpoint failed: cannot create the block store '").s(g_store).s("': ")
          .err(e).c_str());
      return -e;
    }
  }
  BlockList bl{kBlockLog2, uint32_t((uint64_t(size) + kBlockBytes - 1) >> kBlockLog2)};
  out.bytes(&bl, sizeof bl);
  const Known* prev = previous(st);
  Table& t = g_tab[g_cur];
  bool keep = t.n < kMaxKnown && kPool - t.used >= bl.count;  // room to remember it for the fast path
  if (keep) t.k[t.n] = Known{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                             st.st_ctim.tv_sec, st.st_ctim.tv_nsec, t.used, bl.count};
  const Table& p = g_tab[g_cur ^ 1];
  for (uint32_t k = 0; k < bl.count; ++k) {
    int64_t off = int64_t(k) << kBlockLog2;
    size_t len = size - off < int64_t(kBlockBytes) ? size_t(size - off) : size_t(kBlockBytes);
    BlockHash h;
    if (int rc = put_block(fd, path, off, len, prev ? &p.pool[prev->first + k] : nullptr, &h); rc != 0) return rc;
    if (keep) t.pool[t.used + k] = h;
    if (!out.bytes(&h, sizeof h)) return -ENOMEM;
  }
  if (keep) {
    t.used += bl.count;
    ++t.n;
  }
  return 0;
}

int files_blocks_end(bool saved) {
  if (g_buf) {
    munmap(g_buf, kBlockBytes);
    g_buf = nullptr;
  }
  int rc = saved && g_npending ? flush_pending() : 0;
  g_npending = 0;  // a failed save's blocks stay out of the store (its directory is emptied or abandoned)
  if (rc != 0 || !g_swept_needed || !g_store[0]) return rc;
  // The sweep: store entries no generation links any more. A checkpoint racing with it that loses a
  // block it meant to link (ENOENT) writes the block again; a link it made first keeps the block alive.
  int dfd = open(g_store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  static char dents[1 << 15];
  for (;;) {
    long n = syscall(SYS_getdents64, dfd, dents, sizeof dents);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const char* name = dents + off + 19;  // struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name
      unsigned short reclen;
      memcpy(&reclen, dents + off + 16, sizeof reclen);
      struct stat st;
      if (strlen(name) == 32 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
          st.st_nlink == 1 && unlinkat(dfd, name, 0) == 0)
        ++g_stats.swept;
      off += reclen;
    }
  }
  close(dfd);
  return 0;
}

const FilesBlockStats& files_block_stats() { return g_stats; }

void files_block_hex(const BlockHash& h, char* out) {
  static const char d[] = "0123456789abcdef";
  uint64_t v[2] = {h.hi, h.lo};
  for (int w = 0; w < 2; ++w)
    for (int k = 0; k < 16; ++k) out[w * 16 + k] = d[(v[w] >> (60 - 4 * k)) & 15];
  out[32] = '\0';
}

}  // namespace revive::plugins
