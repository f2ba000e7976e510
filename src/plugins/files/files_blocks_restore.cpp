// files plugin, restore side of large files saved by blocks (files_blocks.cpp): each block is read from
// the image's directory (GEN/.blk-<hash>), its XXH3-128 checked, and written at its offset unless the
// file holds those bytes already. A block that
// is missing, of the wrong length or damaged fails the restore naming the file, the block and the image:
// never a silently wrong file. Runs in the restored process with user threads held: one mmap'ed buffer.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"

namespace revive::inject {
__attribute__((weak)) const char* restored_image() { return ""; }
}  // namespace revive::inject

namespace revive::plugins {
namespace {

struct Fill {
  const char* path;  // the file restored
  const char* image;
  char dir[PATH_MAX];  // the image's directory
  char* buf;
  char* cur;   // the file's bytes where the block goes, when it could be read (rfd >= 0)
  int rfd;     // the file opened for reading, -1 if it cannot be
  char* msg;
  size_t cap;
  char line[PATH_MAX * 3 + 200];
};

// "block K (bytes A..B) of 'P' WHAT[: REASON]: 'DIR/.blk-H' (image 'I')": the reason first, since the
// engine keeps 400 bytes of a plugin's message.
int refuse(Fill& f, uint32_t k, int64_t off, size_t len, const char* block, const char* what, int err, bool say_err) {
  Msg m(f.line, sizeof f.line);
  m.s("block ").u(k).s(" (bytes ").i(off).s("..").i(off + int64_t(len)).s(") of '").s(f.path).s("' ").s(what);
  if (say_err) m.s(": ").err(err);
  m.s(": '").s(block).s("' (image '").s(f.image).s("')");
  return fail(f.msg, f.cap, m, err);
}

int fill_one(Fill& f, int fd, uint32_t k, int64_t off, size_t len, const BlockHash& h) {
  char hx[33], block[PATH_MAX];
  files_block_hex(h, hx);
  Msg(block, sizeof block).s(f.dir).s("/").s(kBlockPrefix).s(hx);
  int bfd = open(block, O_RDONLY | O_CLOEXEC);
  if (bfd < 0) {
    int e = errno;
    return refuse(f, k, off, len, block, e == ENOENT ? "is missing" : "cannot be read", e, e != ENOENT);
  }
  struct stat st;
  size_t got = 0;
  int err = fstat(bfd, &st) != 0 ? errno : 0;
  while (!err && got < len) {
    ssize_t n = read(bfd, f.buf + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  close(bfd);
  if (err || got != len || st.st_size != int64_t(len)) {
    return refuse(f, k, off, len, block, "is damaged (wrong length)", err ? err : EIO, err != 0);
  }
  XXH128_hash_t x = XXH3_128bits(f.buf, len);
  if (x.low64 != h.lo || x.high64 != h.hi)
    return refuse(f, k, off, len, block, "is damaged (its contents do not match its hash)", EIO, false);
  // Where the file still holds the block (most of a large file the run changed in a few places), it is
  // left as it is: reading 1 MiB from the page cache is cheaper than dirtying it for writeback again.
  if (f.rfd >= 0) {
    size_t have = 0;
    while (have < len) {
      ssize_t n = pread(f.rfd, f.cur + have, len - have, off + int64_t(have));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      have += size_t(n);
    }
    if (have == len && memcmp(f.cur, f.buf, len) == 0) return 0;
  }
  for (size_t done = 0; done < len;) {
    ssize_t w = pwrite(fd, f.buf + done, len - done, off + int64_t(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      return fail(f.msg, f.cap, Msg(f.line, sizeof f.line).s("cannot write '").s(f.path).s("' back at ").i(off)
          .s(": ").err(e), e);
    }
    done += size_t(w);
  }
  return 0;
}

}  // namespace

bool files_skip_blocks(In& in) {
  BlockList bl;
  if (!in.bytes(&bl, sizeof bl) || bl.count > in.remaining() / sizeof(BlockHash)) return false;
  return in.skip(size_t(bl.count) * sizeof(BlockHash));
}

int files_fill_blocks(In& in, const FileEntry& e, const char* path, int fd, char* msg, size_t cap) {
  static Fill f;
  f.path = path;
  f.image = inject::restored_image();
  f.msg = msg;
  f.cap = cap;
  BlockList bl;
  if (!in.bytes(&bl, sizeof bl) || bl.block_log2 != kBlockLog2 ||
      uint64_t(bl.count) != (uint64_t(e.size) + kBlockBytes - 1) >> kBlockLog2 ||
      bl.count > in.remaining() / sizeof(BlockHash)) {
    return fail(msg, cap, Msg(f.line, sizeof f.line).s("files section: malformed block list of '").s(path).s("'"),
                EINVAL);
  }
  const char* slash = f.image ? strrchr(f.image, '/') : nullptr;
  if (!slash || size_t(slash - f.image) >= sizeof f.dir) {
    return fail(msg, cap, Msg(f.line, sizeof f.line).s("cannot restore '").s(path)
        .s("': saved by blocks beside its image, but the image's path is unknown"), EINVAL);
  }
  memcpy(f.dir, f.image, size_t(slash - f.image));
  f.dir[slash - f.image] = '\0';
  void* p = mmap(nullptr, 2 * kBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(msg, cap, Msg(f.line, sizeof f.line).s("cannot map a block buffer for '").s(path)
      .s("'"), ENOMEM);
  f.buf = static_cast<char*>(p);
  f.cur = f.buf + kBlockBytes;
  f.rfd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);  // unreadable (mode 0200): every block written
  int rc = 0;
  for (uint32_t k = 0; k < bl.count && rc == 0; ++k) {
    BlockHash h;
    if (!in.bytes(&h, sizeof h)) {
      rc = fail(msg, cap, Msg(f.line, sizeof f.line).s("files section: truncated block list of '").s(path).s("'"), EINVAL);
      break;
    }
    int64_t off = int64_t(k) << kBlockLog2;
    size_t len = e.size - off < int64_t(kBlockBytes) ? size_t(e.size - off) : size_t(kBlockBytes);
    rc = fill_one(f, fd, k, off, len, h);
  }
  if (f.rfd >= 0) close(f.rfd);
  munmap(f.buf, 2 * kBlockBytes);
  return rc;
}

}  // namespace revive::plugins
