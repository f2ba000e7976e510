// The physical limit the checkpoint bandwidth is compared with: the same bytes written with plain
// write(2) + fsync(2) to the same directory, and read back with read(2), in the same run.
#ifndef REVIVE_BENCH_APPLEVEL_RAW_IO_H_
#define REVIVE_BENCH_APPLEVEL_RAW_IO_H_

#include <cstddef>
#include <string>

namespace bench {

// Seconds to create `path`, write `len` bytes of `data` in 8 MiB calls, fsync and close. <0 on error.
double RawWriteFsync(const std::string& path, const char* data, size_t len);
// The same, streamed out of the page cache as the library's files are (core/env_posix.cc): writeback
// started every 8 MiB, what lies 16 MiB behind waited for and dropped (POSIX_FADV_DONTNEED). On this VM
// (fresh page-cache pages cost a host fault) that is the fastest way to write a new file.
double RawWriteStreamedFsync(const std::string& path, const char* data, size_t len);
// Evicts `path` from the page cache (fsync + posix_fadvise DONTNEED), so a following read hits the disk
// as far as the kernel allows without root-only drop_caches.
void Evict(const std::string& path);
// Seconds to read all of `path` into `buf` (at least its size). <0 on error.
double RawRead(const std::string& path, char* buf, size_t len);
double Now();  // CLOCK_MONOTONIC seconds

}  // namespace bench

#endif
