// Walked files the stopped run renamed away, and node-local files it created, after the checkpoint
// (files_renamed.cpp): the restore notes every entry, then moves aside each saved walked inode, and each
// file the computation created after the checkpoint, found under a name no entry has. No allocation.
#pragma once

#include <stdint.h>
#include <sys/stat.h>

#include "plugins/files/files_record.h"

namespace revive::plugins {

void renamed_begin();  // before the first entry (maps the tables)
void renamed_end();    // on every way out of the restore (unmaps them)
// Every entry's path; `id` for an entry that carries its inode's identity (walked or open; else nullptr).
void renamed_note(const char* path, const FileIdentity* id);
// After the last entry (launch root): walks the node-local directories as the checkpoint's scan does and
// moves aside, from under names no entry has, the saved walked inodes and the files born after the
// checkpoint's moment ck (0: unknown, then not those) that ours() says the computation created, then the
// directories born after ck that ours() names and that hold nothing else by then
// (REVIVE_FILES_AFTER=keep: nothing).
void renamed_sweep(int64_t ck_sec, int64_t ck_nsec, bool (*ours)(const struct statx&));

// After the sweep (every process): reads the target generation's renames log (preimage_record.h
// PreRename) and moves aside, from the last name the log gives it, each file an entry of this process
// saved (its identity), and, in the launch root, each file born after the checkpoint's moment ck and
// before this restart's processes, when that name is not its first one nor an entry's and still holds it.
// Anywhere, not only below the node-local roots. A damaged log is warned (byte offset) and read no further.
void renamed_logged(int64_t ck_sec, int64_t ck_nsec);

}  // namespace revive::plugins
