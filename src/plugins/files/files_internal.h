// Internals of the files plugin shared by its files (policy, save, scan, restore).
#pragma once

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/common/section_io.h"
#include "plugins/files/files_record.h"

namespace revive::plugins {

// Policy, read once by files_init (environment, before main) and kept in memory, so a restored process
// follows the policy it was launched with.
struct FilesPolicy {
  bool written;        // REVIVE_FILES=written (default) | none
  int64_t max_bytes;   // REVIVE_FILES_MAX_MB
  int64_t delta_bytes; // REVIVE_FILES_DELTA_MB: files this large or larger are saved by blocks (0: never)
  char local[1024];    // REVIVE_LOCAL_DIRS: ':'-separated absolute directories ("" = none)
  char records[512];   // revive's per-user runtime records (launch/user_record.cpp): never walked
  char levels[512];    // multi-level storage's node-local root (REVIVE_LOCAL_PATH, else /dev/shm/revive-<uid>):
                       // revive's own images and pieces, never walked (else each image holds the older ones)
  bool displace;       // REVIVE_FILES_AFTER=move (default) | keep: files born after the checkpoint in the
                       // root's working directory, and in another process's when it lies below the
                       // launch's, are moved aside at restore
  bool root;           // this process is the one `revive launch` started (REVIVE_LAUNCH_ROOT == pid)
  int64_t t0_sec;      // REVIVE_LAUNCH_T0: when the computation was launched (unix seconds, ns)
  int64_t t0_nsec;
  bool launched;       // REVIVE_LAUNCH_T0 is set (every process of a launched computation): record creations
  bool walk_birth;     // REVIVE_LOCAL_WALK=birth: the walk tells ours by owner and birth time, not by the
                       // creation log (created_log.h), for programs the wrappers cannot see (static, inline
                       // system calls)
  char launch_cwd[1024];  // REVIVE_LAUNCH_CWD: the launch root's working directory ("" = unknown)
};
extern FilesPolicy g_files;

int files_init();
int files_save(inject::SectionWriter& w);
// Which process of a host walks its node-local directories (files_walker.cpp): drain publishes this
// process's candidacy; files_walker, at save, says whether it is the elected one (without an election this
// checkpoint: whether it is the launch root); files_walked, in a restored process, whether it walked at the
// checkpoint.
int files_walk_drain(uint64_t gen, char* msg, size_t cap);
bool files_walker();
bool files_walked();
int files_restore(inject::SectionReader& r, char* msg, size_t cap);

// Saved-file bookkeeping of one checkpoint (save.cpp): false if (dev, ino) was saved already, else
// remembers it. Static table; files past its end are saved again (harmless duplicates).
bool files_first(dev_t dev, ino_t ino);
// Whether the last save of this process holds (dev, ino) (pre-images leave such files to the image).
bool files_saved(dev_t dev, ino_t ino);
// Saves one entry: FileEntry, path, then `size` bytes read from fd with pread. 0 or -errno (warned).
// `id` is written after the path for an entry whose origin carries one (file_origin_has_id; must be given).
int files_put(Out& out, FileOrigin origin, int fd, const char* path, int64_t size, uint32_t mode,
              int64_t mtime_sec, int64_t mtime_nsec, const FileIdentity* id = nullptr);
// Warns (once per file per process) that a file was too large to save.
void files_too_large(const char* path, dev_t dev, ino_t ino, int64_t size);
// Large files by blocks (files_blocks.cpp). begin/end bracket one save; files_blocks_on says whether a
// file of `size` bytes goes by blocks at this checkpoint; files_put_blocks writes its BlockList and
// hashes into out and its new blocks beside the image; end(saved) makes them durable and sweeps the
// store. 0 or -errno (warned).
struct BlockHash {
  uint64_t lo, hi;  // XXH3-128
};
struct FilesBlockStats {
  int64_t read_bytes, written_bytes, cloned_bytes;  // of the file read; blocks copied; blocks cloned
  uint32_t written, linked, swept;                  // blocks stored new; linked from the store; swept
};
void files_blocks_begin();
bool files_blocks_on(int64_t size);
int files_put_blocks(Out& out, int fd, const char* path, int64_t size);
int files_blocks_end(bool saved);
const FilesBlockStats& files_block_stats();  // of the last save (bench, tests)
void files_block_hex(const BlockHash& h, char* out);  // 32 hex digits (high64 then low64) + nul
// Restore of a kBlocks entry's payload into fd (files_blocks_restore.cpp); skip_blocks reads past it.
int files_fill_blocks(In& in, const FileEntry& e, const char* path, int fd, char* msg, size_t cap);
bool files_skip_blocks(In& in);

// Calls f(const dirent64*) for each entry of the directory open as dfd, read with getdents64 into buf
// (restore and signal-safe paths: no allocation); f returns false to stop.
template <class F>
void files_each_dirent(int dfd, char* buf, size_t cap, F&& f) {
  for (;;) {
    long got = syscall(SYS_getdents64, dfd, buf, cap);
    if (got <= 0) return;
    for (long pos = 0; pos < got;) {
      auto* d = reinterpret_cast<const struct dirent64*>(buf + pos);
      pos += d->d_reclen;
      if (!f(d)) return;
    }
  }
}

// True if path is inside one of the node-local directories.
bool files_local(const char* path);
// True if absolute `path` lies below directory `dir` (a trailing slash of dir ignored).
bool files_under(const char* path, const char* dir);

// Where restores move files aside, in the directory that held them.
inline constexpr char kDisplacedDir[] = ".revive-displaced";

// The walk of the node-local directories (files_scan.cpp): below each root, it enters only directories
// modified since the launch (mtime; bounded by depth 12 and 20000 directories, past which it warns ending
// with `lost`) and calls file(ctx, dirfd, path, name) for each regular file of those (path: the file's
// whole path, name: its name in dirfd). skip_displaced: kDisplacedDir directories are not entered. A
// nonzero return of file stops the walk and is returned. dir_done (optional) is called the same way for
// each directory below a root once the walk has been through it (deepest first), so it may move it. No
// allocation.
using WalkFile = int (*)(void* ctx, int dirfd, const char* path, const char* name);
int files_walk_local(WalkFile file, void* ctx, bool skip_displaced, const char* lost, WalkFile dir_done = nullptr);
// The root's walk of the node-local directories: saves every regular file the creation log names (or, with
// REVIVE_LOCAL_WALK=birth or a damaged log, every one of ours born since the launch) that is not saved yet,
// outside the checkpoint directory. 0 or -errno.
int files_scan(Out& out);
// This process's working directory listing (kListing): the root's always, another process's when it lies
// below the launch's working directory (REVIVE_LAUNCH_CWD). 0 or -errno.
int files_list_cwd(Out& out);
// Restore of a kListing entry: moves files born after e.mtime that are not listed aside. 0 or -errno.
int files_displace(In& in, const FileEntry& e, const char* dir, char* msg, size_t cap);
// Renames `name` (in directory dfd, whose path is dir) into dir/.revive-displaced/ (made on first use, its
// fd kept in *aside; a free name found by adding .1, .2...) and warns naming both paths and `why`.
// 0 or -errno (nothing warned).
int files_move_aside(int dfd, const char* dir, const char* name, int* aside, const char* why);

}  // namespace revive::plugins
