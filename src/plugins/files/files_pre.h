// Pre-images of files changed after a checkpoint (files_pre.cpp, docs/plugins.md "files"). The hooks run
// in the program's threads, inside the libc wrappers, before the call that modifies a file proceeds; they
// keep errno, never fail the program's call, and use raw system calls only (no allocation, no lock).
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

namespace revive::plugins {

// open/openat/creat with these flags: preserves the file `path` (relative to dirfd) names, if it exists
// (O_APPEND without O_TRUNC: only its size, to cut it back to; a later change of another kind copies it).
void pre_open(int dirfd, const char* path, int flags);
// fopen/freopen with this mode ("w", "a", "r+"...; "a", "a+": appends).
void pre_fopen(const char* path, const char* mode);
// truncate (follow: the file a symlink names), unlink/rename's victim or source (!follow: the name itself).
// The contents are always copied (files_pre.cpp preserve: a hard link would go on changing).
void pre_path(int dirfd, const char* path, bool follow);
// ftruncate: the file open at fd.
void pre_fd(int fd);
// fcntl(F_SETFL) without O_APPEND: if fd was open for appending, as pre_fd (its writes may now land anywhere).
void pre_setfl(int fd);
// Mappings (files_pre_map.cpp): mmap/mmap64 of fd with these prot and flags, before (a shared writable
// mapping changes the file's bytes anywhere: as pre_fd) and after it returned addr (a shared mapping of a
// file open read-write is noted: it may become writable); mprotect adding PROT_WRITE to [addr, addr+len)
// (the shared file mappings there, found in /proc/self/maps: as pre_path of each).
void pre_map(int fd, int prot, int flags);
void pre_mapped(void* addr, size_t len, int fd, int prot, int flags);
void pre_mprotect(const void* addr, size_t len, int prot);
// Pre-images are being kept (a complete generation exists and nothing is quieting the hooks).
bool pre_active();
// The target generation's pre-image directory (DIR/ckpt-G/.pre, maybe not made yet), or nullptr when
// pre-images are off; quieting does not matter (the restore reads the renames log there).
const char* pre_dir();

// Renames (files_pre_rename.cpp, preimage_record.h PreRename): before the call, rename_from notes the
// file `path` (relative to dir) names; after a successful one, rename_to appends the record naming where it
// went. The note lives on the wrapper's stack.
struct RenameNote {
  uint64_t dev, ino;
  int64_t btime_sec, btime_nsec;
  bool on;
  bool replaces;  // the new name holds a file already
  char from[4096];
};
void rename_from(RenameNote* n, int dir, const char* path, int to_dir, const char* to_path);
void rename_to(RenameNote* n, int dir, const char* path);

// The generation pre-images go to, kept by the files plugin: found on disk at init (the newest complete
// ckpt-G), taken from the checkpoint this process was part of (resume), or the restored one (restore).
void pre_init();
void pre_saving(const char* gen_dir);  // files_save: the generation being written
void pre_resumed(bool ok);
void pre_restored(const char* image);  // the image this process was restored from

// Counts for bench/plugins and tests: copies kept, cut-back records kept (appends), files skipped.
struct PreStats {
  long preserved, skipped, cut_back;
};
const PreStats& pre_stats();

}  // namespace revive::plugins
