#include "raw_io.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace bench {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double RawWriteFsync(const std::string& path, const char* data, size_t len) {
  const double t0 = Now();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < len) {
    const ssize_t n = write(fd, data + off, std::min<size_t>(len - off, 8u << 20));
    if (n <= 0) { close(fd); return -1; }
    off += static_cast<size_t>(n);
  }
  const bool ok = fsync(fd) == 0;
  close(fd);
  return ok ? Now() - t0 : -1;
}

double RawWriteStreamedFsync(const std::string& path, const char* data, size_t len) {
  constexpr size_t kChunk = size_t{8} << 20;
  const double t0 = Now();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  for (size_t off = 0, k = 0; off < len; off += kChunk, ++k) {
    const size_t n = std::min(len - off, kChunk);
    for (size_t done = 0; done < n;) {
      const ssize_t w = write(fd, data + off + done, n - done);
      if (w <= 0) { close(fd); return -1; }
      done += static_cast<size_t>(w);
    }
    sync_file_range(fd, static_cast<off_t>(off), static_cast<off_t>(n), SYNC_FILE_RANGE_WRITE);
    if (k >= 2) {
      const off_t old = static_cast<off_t>(off - 2 * kChunk);
      sync_file_range(fd, old, static_cast<off_t>(kChunk),
                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      posix_fadvise(fd, old, static_cast<off_t>(kChunk), POSIX_FADV_DONTNEED);
    }
  }
  const bool ok = fsync(fd) == 0;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return ok ? Now() - t0 : -1;
}

void Evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  fdatasync(fd);  // dirty pages cannot be dropped
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

double RawRead(const std::string& path, char* buf, size_t len) {
  const double t0 = Now();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t off = 0;
  for (;;) {
    const ssize_t n = read(fd, buf + off, std::min<size_t>(len - off, 8u << 20));
    if (n < 0) { close(fd); return -1; }
    if (n == 0 || off + static_cast<size_t>(n) == len) { off += static_cast<size_t>(n); break; }
    off += static_cast<size_t>(n);
  }
  close(fd);
  return Now() - t0;
}

}  // namespace bench
