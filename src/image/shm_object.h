// Recreating the shared memory objects an image maps (format.h ShmRecord), shared by revive-restart (a
// lone process restores its own objects) and `revive restart` (the tree's skeleton creates each object
// once for every process: src/plugins/proctree/tree_shm.cpp). libc only, no allocation: revive-restart
// calls it while it owns the address space it restores.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "image/format.h"

namespace revive::image {

// The size to give object s: its recorded size, at least `extent` (the end of the furthest mapped range);
// a SysV segment or a file exactly its recorded size (a file mapping may reach past the file's end).
uint64_t shm_size(const ShmRecord& s, uint64_t extent);

// A SysV segment for record s, `size` bytes: the checkpointed one itself when it still exists unattached
// with the same key (what a killed run leaves), else a new segment with the recorded key and mode, asking
// the kernel for the recorded id (/proc/sys/kernel/shm_next_id, which needs CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE over the IPC namespace). A stale unattached segment holding the key is removed
// first. Returns the id or -errno; `note` gets a warning (empty when all is as recorded), e.g. a new id.
int sysv_recreate(const ShmRecord& s, uint64_t size, char* note, size_t note_len);

// Zeroes [off, off + len) of a file: a hole punched (the pages then read as zero and take no space), or,
// where the filesystem cannot punch, zeros written. False with errno set on failure.
bool zero_range(int fd, uint64_t off, uint64_t len);

// Sets a file's mtime back to mtime_ns (what a restored private mapping of it checks), leaving atime.
void set_mtime(int fd, int64_t mtime_ns);

// A memfd for an anonymous, memfd or deleted-file object, named after the original (path as in maps),
// `size` bytes, not close-on-exec (it is handed to the restorers). Returns the fd or -errno.
int memfd_recreate(const char* path, uint64_t size);
// Opens (creating) the file of a tmpfs or disk shared mapping; missing directories above it are created
// (mode 0700): an MPI job's session directory (/tmp/ompi.HOST.UID/pid.N/...) is gone after a clean exit
// of the killed job's other processes, and never existed on another host. fd or -errno.
int shm_file_open(const char* path);

}  // namespace revive::image
