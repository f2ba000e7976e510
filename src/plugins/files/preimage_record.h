// Pre-images (docs/plugins.md "files", "Files changed after the checkpoint"): what a file that existed at
// checkpoint G, was not saved in G's images and was modified, truncated, replaced or deleted afterwards
// looked like at G. Written by the process about to modify it (files_pre.cpp), read back by
// `revive restart` before any process is restored (src/cli/preimages.cpp). In DIR/ckpt-G/.pre/:
//   <dev>-<ino>          the record (below), published last with link(): its presence is the claim
//   <dev>-<ino>.<tid>.d  the contents (a copy, or a clone where the file system shares extents)
// Anything else there (a *.r temporary, a data file without a record) is what a killed process left
// before its modification could happen: ignored.
#pragma once

#include <stdint.h>

namespace revive::plugins {

constexpr char kPreDir[] = ".pre";
constexpr char kPreMagic[4] = {'R', 'V', 'P', 'I'};
constexpr uint32_t kPreVersion = 1;

struct PreRecord {
  char magic[4];
  uint32_t version;
  uint64_t dev, ino;   // of the file at G (also the record's name)
  uint64_t size;       // bytes of the data file
  uint32_t mode;       // st_mode & 07777
  uint32_t uid, gid;
  uint32_t path_len;   // then the file's absolute path (no nul)
  uint32_t data_len;   // then the data file's name in the same directory (no nul)
  uint32_t pad;
  int64_t mtime_sec, mtime_nsec;
  uint64_t data_hash;  // XXH3-64 of the data file's `size` bytes
  uint64_t self_hash;  // XXH3-64 of this struct (with self_hash 0), the path and the data file's name
};
static_assert(sizeof(PreRecord) == 88, "PreRecord layout");

}  // namespace revive::plugins
