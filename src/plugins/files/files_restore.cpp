// files plugin, restore side: writes every saved file back (in place: same inode when it still exists,
// so descriptions shared through the restart's skeleton keep pointing at it), sets its mode and mtime,
// before the fd plugin reopens descriptors (it runs after this plugin). Walked files are recreated when
// missing and rewritten only when the file at their path is still the inode saved (kScannedId); another
// file there is left alone; a saved walked inode the stopped run renamed to a new name is moved aside
// afterwards (files_renamed.cpp). Runs in the restored process with user threads held: no allocation, no stdio.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/files_pre.h"
#include "plugins/files/files_renamed.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

struct Ctx {
  In& in;
  char* msg;
  size_t cap;
  char line[PATH_MAX + 200];
};

char g_buf[1 << 16];

// Skips n bytes of the section (a scanned file that exists already).
bool skip(In& in, int64_t n) {
  while (n > 0) {
    size_t want = n < int64_t(sizeof g_buf) ? size_t(n) : sizeof g_buf;
    if (!in.bytes(g_buf, want)) return false;
    n -= int64_t(want);
  }
  return true;
}

// Skips an entry's payload: its contents, or its block list.
bool skip_payload(In& in, const FileEntry& e) {
  return e.format == uint32_t(FileFormat::kBlocks) ? files_skip_blocks(in) : skip(in, e.size);
}

// An entry whose file is left as it is: its payload skipped (0), or the section named as cut short.
int leave(Ctx& c, const FileEntry& e, const char* path) {
  if (skip_payload(c.in, e)) return 0;
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("files section: truncated in the contents of '")
      .s(path).s("'"), EINVAL);
}

// Writes an inline entry's contents into fd from offset 0.
int fill_inline(Ctx& c, const FileEntry& e, const char* path, int fd) {
  for (int64_t off = 0; off < e.size;) {
    size_t want = e.size - off < int64_t(sizeof g_buf) ? size_t(e.size - off) : sizeof g_buf;
    if (!c.in.bytes(g_buf, want)) {
      return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("files section: truncated in the contents of '")
          .s(path).s("'"), EINVAL);
    }
    for (size_t done = 0; done < want;) {
      ssize_t w = pwrite(fd, g_buf + done, want - done, off + int64_t(done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int err = w < 0 ? errno : EIO;
        return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("cannot write '").s(path).s("' back: ").err(err), err);
      }
      done += size_t(w);
    }
    off += int64_t(want);
  }
  return 0;
}

// mkdir -p of path's parent; directories created get `mode` (the saved parent's permission bits).
int make_parents(Ctx& c, const char* path, uint32_t mode) {
  char dir[PATH_MAX];
  size_t n = strlen(path);
  memcpy(dir, path, n + 1);
  char* last = strrchr(dir, '/');
  if (!last || last == dir) return 0;
  *last = '\0';
  struct stat st;
  if (stat(dir, &st) == 0) return 0;
  for (char* p = dir + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) break;  // the final mkdir reports the problem
    *p = '/';
  }
  if (mkdir(dir, mode & 07777 ? mode & 07777 : 0700) != 0 && errno != EEXIST) {
    int e = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("cannot recreate directory '").s(dir).s("' for '")
        .s(path).s("': ").err(e), e);
  }
  return 0;
}

// What to do with a walked file's entry, by what is at its path now.
enum class Walked { kMissing, kSame, kUnchanged, kOther };

// The creation log, read once per restore when a walked file's path holds another inode or the sweep
// meets a file born after the checkpoint (0: not read yet, 1: read, 2: none or unusable).
int g_log;

// Whether the file at a walked entry's path, another inode than the one saved, is the computation's too:
// the stopped run replaced the file after the checkpoint (`sort f > tmp && mv tmp f`, an editor's or
// Python's write-then-rename), which its creation log records. Then it is rewritten like the saved one.
// The renamed-away sweep asks the same of a file born after the checkpoint under a name no entry has, and
// of a directory born after it (the log's directory records).
bool replaced_by_us(const struct statx& sx) {
  if (!(sx.stx_mask & STATX_BTIME) || sx.stx_uid != geteuid()) return false;
  if (g_log == 0) {
    g_log = created_load("node-local files the stopped run replaced or created after the checkpoint are left as they are") ==
                    CreatedLoad::kOk ? 1 : 2;
  }
  return g_log == 1 && created_has(makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino, sx.stx_btime.tv_sec,
                                   sx.stx_btime.tv_nsec | (S_ISDIR(sx.stx_mode) ? kCreatedDirBit : 0));
}

Walked walked_state(const FileEntry& e, const FileIdentity* id, const char* path) {
  struct statx sx;
  if (syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
              STATX_TYPE | STATX_UID | STATX_SIZE | STATX_MTIME | STATX_INO | STATX_BTIME, &sx) != 0) {
    return errno == ENOENT ? Walked::kMissing : Walked::kOther;
  }
  // kScanned (versions 1-2) carries no identity: whatever is there may be someone else's.
  if (!id || !S_ISREG(sx.stx_mode) || !(sx.stx_mask & STATX_BTIME)) return Walked::kOther;
  if (makedev(sx.stx_dev_major, sx.stx_dev_minor) != id->dev || sx.stx_ino != id->ino ||
      sx.stx_btime.tv_sec != id->btime_sec || sx.stx_btime.tv_nsec != id->btime_nsec) {
    return replaced_by_us(sx) ? Walked::kSame : Walked::kOther;
  }
  // The same inode. Untouched since the checkpoint (size and mtime as saved): nothing to write.
  if (int64_t(sx.stx_size) == e.size && sx.stx_mtime.tv_sec == e.mtime_sec && sx.stx_mtime.tv_nsec == e.mtime_nsec)
    return Walked::kUnchanged;
  return Walked::kSame;
}

int write_back(Ctx& c, const FileEntry& e, const char* path, const FileIdentity* id) {
  bool scanned = e.origin == uint32_t(FileOrigin::kScanned) || e.origin == uint32_t(FileOrigin::kScannedId);
  struct stat st;
  // A walked file is ours to overwrite only while it is the inode saved: the stopped run appended to it or
  // rewrote it after the checkpoint. Written in place like an open one (below), without O_EXCL.
  if (scanned) {
    Walked w = walked_state(e, id, path);
    if (w == Walked::kOther || w == Walked::kUnchanged) {
      return leave(c, e, path);
    }
    if (w == Walked::kSame) scanned = false;
  }
  // A node-local file the computation only read (a script bash runs from /tmp, an input under /dev/shm)
  // that is still there as it was: nothing to write, and it may not even be ours to write (another user's
  // script). Only for kLocal: a file open for writing is rewritten whatever its timestamp says, since a
  // write right after the checkpoint can fall in the same coarse mtime tick.
  if (e.origin == uint32_t(FileOrigin::kLocal) && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size == e.size && st.st_mtim.tv_sec == e.mtime_sec && st.st_mtim.tv_nsec == e.mtime_nsec) {
    return leave(c, e, path);
  }
  if (int rc = make_parents(c, path, e.dir_mode); rc != 0) return rc;
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (scanned ? O_EXCL : 0);
  int fd = open(path, flags, e.mode);
  if (fd < 0 && errno == EACCES && !scanned && chmod(path, e.mode | 0200) == 0) fd = open(path, flags, e.mode);
  // A walked file that appeared since the lstat above (the restart's coordinator writing its record
  // under /tmp/revive-UID at this moment) is no longer missing: left alone, as if lstat had seen it.
  if (fd < 0 && scanned && errno == EEXIST) {
    return leave(c, e, path);
  }
  if (fd < 0) {
    int err = errno;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("cannot write '").s(path)
        .s("' back to its checkpoint contents: ").err(err), err);
  }
  int rc = e.format == uint32_t(FileFormat::kBlocks) ? files_fill_blocks(c.in, e, path, fd, c.msg, c.cap)
                                                     : fill_inline(c, e, path, fd);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  int err = 0;
  if (ftruncate(fd, e.size) != 0) err = errno;
  if (!err && fstat(fd, &st) == 0 && (st.st_mode & 07777) != e.mode) fchmod(fd, e.mode);  // best effort
  struct timespec times[2] = {{0, UTIME_OMIT}, {e.mtime_sec, e.mtime_nsec}};
  if (!err && futimens(fd, times) != 0) {
    err = errno;
    // Another user's file we may write (a shared input under /tmp, mode 0666): only its owner may set
    // a chosen mtime. Its contents are back; the time is the one thing that is not, and that is said.
    if (err == EPERM && fstat(fd, &st) == 0 && st.st_uid != geteuid()) {
      warn(Msg(c.line, sizeof c.line).s("'").s(path).s("' written back to its checkpoint contents, but its mtime is now's: it belongs to uid ")
          .u(st.st_uid).s(", and only its owner may set it back").c_str());
      err = 0;
    }
  }
  close(fd);
  if (err) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("cannot set size and mtime of '").s(path)
        .s("' back: ").err(err), err);
  }
  return 0;
}

int listing(Ctx& c, const FileEntry& e, const char* path) {
  if (e.size > int64_t(kMaxListing)) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("files section: listing of '").s(path).s("' too large"), EINVAL);
  }
  return files_displace(c.in, e, path, c.msg, c.cap);
}

// The creation log, if replaced_by_us read it, and the renamed-away tables, let go on every way out of
// the restore.
struct LogRelease {
  LogRelease() {
    g_log = 0;
    renamed_begin();
  }
  ~LogRelease() {
    if (g_log == 1) created_unload();
    renamed_end();
  }
};

}  // namespace

int files_restore(inject::SectionReader& r, char* msg, size_t cap) {
  pre_restored(inject::restored_image());  // files changed from now on are kept for this generation
  In in(r);
  Ctx c{in, msg, cap, {}};
  LogRelease log;
  if (!in.tag(kFilesTag)) return fail(msg, cap, Msg(c.line, sizeof c.line).s("files section: bad tag"), EINVAL);
  FileEntry ck{};
  for (uint32_t k = 0;; ++k) {
    FileEntry e;
    if (!in.bytes(&e, sizeof e)) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("files section: truncated at entry ").u(k), EINVAL);
    }
    if (e.origin == uint32_t(FileOrigin::kEnd)) {
      ck = e;  // its mtime: the checkpoint's moment (0 in older images)
      break;
    }
    char path[PATH_MAX];
    if (!in.str(path, sizeof path)) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("files section: truncated path at entry ").u(k), EINVAL);
    }
    const bool inline_bytes = e.format == uint32_t(FileFormat::kInline);
    if (e.origin > kMaxFileOrigin || e.size < 0 || (inline_bytes && uint64_t(e.size) > in.remaining()) ||
        e.format > uint32_t(FileFormat::kBlocks) || (!inline_bytes && e.origin == uint32_t(FileOrigin::kListing)) ||
        path[0] != '/' ||
        (e.mode & ~07777u) != 0 || e.mtime_nsec < 0 || e.mtime_nsec >= 1000000000) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("files section: malformed entry ").u(k).s(" ('").s(path)
          .s("')"), EINVAL);
    }
    FileIdentity id{};
    const bool with_id = file_origin_has_id(e.origin);
    e.origin = file_origin_plain(e.origin);  // an open file's identity serves only the sweep
    if (with_id && !in.bytes(&id, sizeof id)) {
      return fail(msg, cap, Msg(c.line, sizeof c.line).s("files section: truncated identity of '").s(path).s("'"), EINVAL);
    }
    if (e.origin != uint32_t(FileOrigin::kListing)) renamed_note(path, with_id ? &id : nullptr);
    int rc = e.origin == uint32_t(FileOrigin::kListing) ? listing(c, e, path) : write_back(c, e, path, with_id ? &id : nullptr);
    if (rc != 0) return rc;
  }
  if (in.remaining() != 0) {
    return fail(msg, cap, Msg(c.line, sizeof c.line).s("files section: ").u(in.remaining()).s(" trailing bytes"), EINVAL);
  }
  // After every entry: a name the sweep would take may be a later entry's.
  renamed_sweep(ck.mtime_sec, ck.mtime_nsec, replaced_by_us);
  renamed_logged(ck.mtime_sec, ck.mtime_nsec);
  return 0;
}

}  // namespace revive::plugins
