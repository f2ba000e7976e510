// The computation's creation log (docs/plugins.md "files"): every regular file (and directory) a process of
// the computation creates in a node-local directory is recorded, as it is created, by (device, inode, birth
// time) in DIR/.revive-created (DIR: the checkpoint directory, which every process of the computation
// knows, after exec and after a restart too). The launch root's walk (files_scan.cpp) saves a node-local
// file only when the log names it, so files other programs of the same user create there meanwhile stay
// out of the images.
#pragma once

#include <stdint.h>
#include <stdio.h>

namespace revive::plugins {

// On-disk layout: a header, then fixed-size records appended with O_APPEND, one write(2) each.
struct CreatedHeader {
  char magic[8];          // kCreatedMagic
  uint32_t version;       // kCreatedVersion
  uint32_t record_size;   // sizeof(CreatedRecord)
  uint64_t reserved[2];
};
struct CreatedRecord {
  uint64_t dev;           // makedev(statx major, minor)
  uint64_t ino;
  int64_t btime_sec;      // statx birth time (0, 0 where the file system keeps none)
  uint32_t btime_nsec;    // | kCreatedDirBit for a directory (since 2026-11-28; nanoseconds never reach it)
  uint32_t sum;           // XXH32 of the 28 bytes above, seed kCreatedSeed: a torn or foreign record shows
};
static_assert(sizeof(CreatedHeader) == 32 && sizeof(CreatedRecord) == 32);
inline constexpr char kCreatedMagic[8] = {'R', 'V', 'C', 'R', 'E', 'A', 'T', 'E'};
inline constexpr uint32_t kCreatedVersion = 1;
inline constexpr uint32_t kCreatedSeed = 0x63726561;
inline constexpr const char* kCreatedName = ".revive-created";
// A directory's record: its birth time's nanoseconds with the top bit set. The layout and version stay, so
// logs written before still read, and a file's lookup never matches a directory's record.
inline constexpr uint32_t kCreatedDirBit = 0x80000000u;

// Wrappers (program threads, also signal handlers: raw system calls, no allocation, errno kept).
// created_clock: the kernel's coarse real-time clock (the one file timestamps come from), in ns; taken
// before a call that may create a file. created_open: fd was just returned for `path` (relative to dir) by
// an open with these flags (O_EXCL: certainly new; otherwise new when born at or after `t_before`).
int64_t created_clock();
void created_open(int fd, int dir, const char* path, int flags, int64_t t_before);
void created_fopen(FILE* s, const char* path, const char* mode, int64_t t_before);
// A call made the name `path` (relative to dir) and succeeded: the file there is recorded when it is a regular
// file in a node-local directory and new (`fresh`: certainly, as after rename, link, mknod; otherwise born
// at or after `t_before`). A new name of a file made elsewhere (rename, link into the directory) counts:
// the record of an inode already in the log is a harmless duplicate.
void created_path(int dir, const char* path, bool fresh, int64_t t_before);
// mkdir, mkdirat, mkdtemp made the directory `path` (relative to dir): recorded (with kCreatedDirBit) when it
// lies in a node-local directory, so the restore can move aside the directories the stopped run made after
// the checkpoint (files_renamed.cpp).
void created_dir(int dir, const char* path);
// posix_spawn's file actions (created_spawn.cpp), around the spawn (proctree's wrapper): before it, the
// pre-images of the files its actions open for writing; returns the clock to pass after it, which records
// the node-local files its O_CREAT actions made when the spawn succeeded (rc 0).
int64_t spawn_actions_before(const void* file_actions);
void spawn_actions_after(const void* file_actions, int rc, int64_t t_before);

// files_init: the node-local directories' devices (for relative paths) and whether we are launched.
void created_init();

// The walk (launch root, checkpoint thread): reads the log once per checkpoint into a private mapping,
// sorted. kNone: no log (nothing created yet); kBad: unreadable, torn or foreign, warned naming the file
// and the reason (the caller falls back to the birth-time rule).
enum class CreatedLoad { kOk, kNone, kBad };
// `then`: what the caller does without the log, ending the warning (default: the walk's birth-time rule).
CreatedLoad created_load(const char* then = nullptr);
// btime_nsec | kCreatedDirBit asks for a directory's record.
bool created_has(uint64_t dev, uint64_t ino, int64_t btime_sec, uint32_t btime_nsec);
void created_unload();
uint64_t created_count();  // records loaded (tests, bench)

}  // namespace revive::plugins
