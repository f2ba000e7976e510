// Walked files the stopped run renamed away (files_renamed.cpp): the restore notes every entry, then moves
// aside each saved walked inode found under a name no entry has. No allocation (restore context).
#pragma once

#include "plugins/files/files_record.h"

namespace revive::plugins {

void renamed_begin();  // before the first entry (maps the tables)
void renamed_end();    // on every way out of the restore (unmaps them)
// Every entry's path; `id` for a walked entry that carries its inode's identity (else nullptr).
void renamed_note(const char* path, const FileIdentity* id);
// After the last entry: moves aside the saved walked inodes found elsewhere in their directories
// (REVIVE_FILES_AFTER=keep: nothing).
void renamed_sweep();

}  // namespace revive::plugins
