// The files plugin's section (tag "RVFL", version 4; versions 1 to 3 are still read): the contents of files
// the computation writes, so a restart finds them as they were at the checkpoint (docs/plugins.md, "files").
//   u8[4] "RVFL"
//   then entries, each a FileEntry, its path (u32 length + bytes, absolute), for a kScannedId entry a
//   FileIdentity (version 3; kWrittenId and kLocalId: version 4), and then, by its format:
//     kInline: `size` bytes of contents (the only format of version 1, whose `format` field was 0 padding)
//     kBlocks: a BlockList, then `count` XXH3-128 hashes (16 bytes: low64, high64), one per block of
//              1 << block_log2 bytes (the last one shorter); block K is the file
//              <image's directory>/.blk-<32 hex digits: high64 then low64> (files_blocks.cpp)
//   ended by a FileEntry whose origin is 0 (no path, no contents follow it; its mtime is the checkpoint's
//   moment since 2026-11-28, 0 before).
#pragma once

#include <stdint.h>

namespace revive::plugins {

constexpr char kFilesTag[] = "RVFL";
constexpr uint32_t kFilesVersion = 4;
constexpr uint32_t kFilesOldestVersion = 1;

enum class FileOrigin : uint32_t {
  kEnd = 0,
  kWritten = 1,  // open for writing in this process: written back at restore, whatever is there now
  kLocal = 2,    // open (any mode) under a node-local directory: written back at restore
  kScanned = 3,  // not open, found under a node-local directory (created since launch): recreated at
                 // restore only if it is missing (never overwrites: it may be someone else's by now).
                 // Written by versions 1 and 2; version 3 writes kScannedId.
  kListing = 4,  // the launch root's working directory as it was: path = the directory, mtime = when it
                 // was listed, contents = ListItem records. At restore, a regular file there that is not
                 // listed and was born after that moment (the killed run wrote it after the checkpoint:
                 // make's half-written .o) is moved into DIR/.revive-displaced/ with a warning.
  kScannedId = 5,  // a walked file as kScanned, with its identity (FileIdentity after the path). At restore
                   // it is recreated when missing, and written back in place when the file at the path is
                   // still that inode: the computation's own file, which the stopped run changed after the
                   // checkpoint (`echo $i >> out.txt` in a script under /tmp). Any other file there is
                   // left alone, as before (it may be someone else's).
  kWrittenId = 6,  // kWritten and kLocal with the inode's identity after the path (version 4), written where
  kLocalId = 7,    // the file system keeps a birth time: restored as those, and the restore's sweep moves
                   // the inode aside when the stopped run renamed it after the checkpoint (files_renamed.cpp)
};
constexpr uint32_t kMaxFileOrigin = 7;

// Whether an entry of this origin carries a FileIdentity after its path.
constexpr bool file_origin_has_id(uint32_t o) {
  return o == uint32_t(FileOrigin::kScannedId) || o == uint32_t(FileOrigin::kWrittenId) ||
         o == uint32_t(FileOrigin::kLocalId);
}
// An open file's origin without its identity (kWrittenId: kWritten; kLocalId: kLocal); others unchanged.
constexpr uint32_t file_origin_plain(uint32_t o) {
  return o == uint32_t(FileOrigin::kWrittenId) ? uint32_t(FileOrigin::kWritten)
         : o == uint32_t(FileOrigin::kLocalId) ? uint32_t(FileOrigin::kLocal) : o;
}

// Which inode a kScannedId, kWrittenId or kLocalId entry was (statx at the save). The birth time tells a reused inode number, or
// another host's file system whose device and inode numbers happen to match, from the file saved.
struct FileIdentity {
  uint64_t dev;  // makedev(statx major, minor)
  uint64_t ino;
  int64_t btime_sec;  // statx birth time; kScannedId is written only where the file system keeps one
  uint32_t btime_nsec;
  uint32_t reserved;  // 0
};
static_assert(sizeof(FileIdentity) == 32);

// One name of a kListing entry: u32 length, then the name's bytes (no terminator).
constexpr uint32_t kMaxListing = 1 << 20;  // bytes of names listed; a larger directory is not listed

struct FileEntry {
  uint32_t origin;    // FileOrigin
  uint32_t mode;      // st_mode & 07777
  int64_t size;       // bytes of contents that follow the path
  int64_t mtime_sec;  // set again after writing (make compares mtimes)
  int64_t mtime_nsec;
  uint32_t dir_mode;  // st_mode & 07777 of the parent directory, for directories recreated at restore
  uint32_t format;    // FileFormat (version 1: always 0)
};

enum class FileFormat : uint32_t {
  kInline = 0,  // the contents follow the path
  kBlocks = 1,  // a BlockList and the blocks' hashes follow; the blocks are files beside the image
};

struct BlockList {
  uint32_t block_log2;  // 20: 1 MiB blocks
  uint32_t count;       // (size + block - 1) >> block_log2
};
constexpr uint32_t kBlockLog2 = 20;
constexpr uint64_t kBlockBytes = 1ULL << kBlockLog2;
// Name of a block in a generation directory (".blk-" + 32 hex digits) and in the store shared by the
// generations (DIR/.revive-blocks/ + 32 hex digits): see files_blocks.cpp.
constexpr char kBlockPrefix[] = ".blk-";
constexpr char kBlockStore[] = ".revive-blocks";

// Per-file size limit of the default policy (REVIVE_FILES_MAX_MB overrides it): a larger file is not
// saved; a warning names it and the fd plugin's size policy applies to it (docs/plugins.md).
constexpr int64_t kDefaultFilesMaxBytes = 1024LL << 20;
// Files of at least this size (REVIVE_FILES_DELTA_MB overrides it; 0: never) are saved by blocks: only
// blocks no earlier checkpoint stored are written (docs/plugins.md "files", "Large files").
constexpr int64_t kDefaultFilesDeltaBytes = 8LL << 20;

}  // namespace revive::plugins
