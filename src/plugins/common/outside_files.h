// Files the computation shares with the world outside it: regular files open for writing that
// `revive launch` handed to the program from its own caller (a build tool's log on fd 3, a pipeline
// script's `exec 3>>pipeline.log`). Other writers go on appending to them while the computation runs
// and after it is killed, so a restart must neither put back their checkpoint contents (files plugin)
// nor cut them back to their checkpoint size or refuse them for having shrunk (fd plugin): that would
// destroy what the outsiders wrote. `revive launch` lists their inodes in REVIVE_OUTSIDE_FILES
// ("<dev>:<ino>,..." in decimal); each process reads the list once at init into static storage, which a
// restored process gets back with its memory. Matching is by inode: a later open of the same file by the
// program is the same shared file.
#pragma once

#include <sys/types.h>

namespace revive::plugins {

// Reads REVIVE_OUTSIDE_FILES (plugin init only: getenv). Idempotent. False when the value is malformed.
bool outside_files_init();
// Whether the inode is one of them. Async-signal-safe (a scan of a static table).
bool outside_file(dev_t dev, ino_t ino);

}  // namespace revive::plugins
