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

}  // namespace revive::plugins
