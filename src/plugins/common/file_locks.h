// File locks as /proc/self/fdinfo shows them, and taking one again (plugins fd and files). The kernel
// lists in a descriptor's fdinfo ("lock:" lines) the flock, POSIX and OFD locks set through that very
// open file description and owned by this process or by the description. Save context: no allocation.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::plugins {

enum LockKind : uint32_t { kFlock = 1, kPosix = 2, kOfd = 3 };

struct LockRecord {
  int32_t fd;
  uint32_t kind;   // LockKind
  uint32_t write;  // 1: exclusive / F_WRLCK, 0: shared / F_RDLCK
  uint32_t pad;
  int64_t start, len;  // len 0: to the end of the file (and beyond)
};

// Appends fd's locks to out (up to cap); their count, or -1 with why set (a lease, too many).
int file_locks_of(int fd, LockRecord* out, int cap, char* why, size_t why_cap);
// Takes r again on r.fd without blocking: 0 or an errno (EAGAIN/EACCES/EWOULDBLOCK: someone holds one).
int file_lock_take(const LockRecord& r);
const char* file_lock_kind_name(uint32_t kind);

}  // namespace revive::plugins
