// Pre-images (docs/plugins.md "files", "Files changed after the checkpoint"): what a file that existed at
// checkpoint G, was not saved in G's images and was modified, truncated, replaced or deleted afterwards
// looked like at G. Written by the process about to modify it (files_pre.cpp), read back by
// `revive restart` before any process is restored (src/cli/preimages.cpp). In DIR/ckpt-G/.pre/:
//   <dev>-<ino>-<h>          a copy record (kPreCopy), published last with link(): its presence is the
//                            claim (h: XXH3-64 of the host name it holds, decimal; version 1: no -<h>)
//   <dev>-<ino>-<h>.<tid>.d  its contents (a copy, or a clone where the file system shares extents)
//   <dev>-<ino>-<h>+a        a cut-back record (kPreCut, version 2): the file was only appended to
//                            (O_APPEND open), so its first `size` bytes are still G's; no contents. A copy
//                            record of the same file, made at its first change that was not an append,
//                            supersedes it.
// Anything else there (a *.r temporary, a data file without a record) is what a killed process left
// before its modification could happen: ignored.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::plugins {

constexpr char kPreDir[] = ".pre";
constexpr char kPreCutSuffix[] = "+a";
constexpr char kPreMagic[4] = {'R', 'V', 'P', 'I'};
// 1: copies only, the first 88 bytes below, then path and data name (still read). 2: kind, host, birth time.
constexpr uint32_t kPreVersion = 2;
constexpr size_t kPreV1Size = 88;

enum PreKind : uint32_t {
  kPreCopy = 0,  // the data file holds the file's contents at G
  kPreCut = 1,   // the file is to be cut back to `size` bytes (same inode), no data file
};

struct PreRecord {
  char magic[4];
  uint32_t version;
  uint64_t dev, ino;   // of the file at G (also the record's name)
  uint64_t size;       // kPreCopy: bytes of the data file; kPreCut: the file's size at G
  uint32_t mode;       // st_mode & 07777
  uint32_t uid, gid;
  uint32_t path_len;   // then the file's absolute path (no nul)
  uint32_t data_len;   // then the data file's name in the same directory (no nul; 0 for kPreCut)
  uint32_t pad;
  int64_t mtime_sec, mtime_nsec;
  uint64_t data_hash;  // XXH3-64 of the data file's `size` bytes (0 for kPreCut)
  uint64_t self_hash;  // XXH3-64 of the header (with self_hash 0) and the names that follow it
  // Version 2.
  uint32_t kind;       // PreKind
  uint32_t host_len;   // then (after the data name) the host that made it: REVIVE_HOST_ID or the node name
  int64_t btime_sec, btime_nsec;  // birth time of the file at G (0, 0: unknown): its identity with dev, ino
};
static_assert(offsetof(PreRecord, kind) == kPreV1Size, "PreRecord version 1 prefix");
static_assert(sizeof(PreRecord) == 112, "PreRecord layout");

// DIR/ckpt-G/.pre/renames (since 2026-11-28): every rename of a regular file by a process of the
// computation after G, appended (O_APPEND, one write each) by the rename wrappers (files_pre_rename.cpp):
// the file's identity, the name it had and the name it got, both absolute. The restore moves aside a file
// still under a name it got after G when an image saved it or it was born after G (files_renamed.cpp):
// an uninterrupted run at G would not have it there. Records follow each other; a torn or damaged one
// ends the reading (warned with its byte offset). Its name holds no '-': CheckPreimages skips it.
constexpr char kPreRenames[] = "renames";
constexpr char kPreRenameMagic[4] = {'R', 'V', 'R', 'N'};
struct PreRename {
  char magic[4];
  uint32_t size;                  // of the whole record: this header, then from_len + to_len bytes of paths
  uint64_t dev, ino;              // makedev(statx major, minor), as the files section's identities
  int64_t btime_sec, btime_nsec;  // statx birth time (0, 0 where the file system keeps none)
  uint32_t from_len, to_len;
  uint32_t flags;                 // kRenameReplaced
  uint32_t reserved;              // 0
  uint64_t self_hash;             // XXH3-64 of the record (paths included) with self_hash 0
};
static_assert(sizeof(PreRename) == 64, "PreRename layout");
// The new name held a file already, which the rename replaced (its pre-image, when it existed at G, is put
// back by `revive restart` into the inode now there): the restore leaves the file under that name.
constexpr uint32_t kRenameReplaced = 1;

}  // namespace revive::plugins
