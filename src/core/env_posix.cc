// POSIX implementation of Env.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>

#include "core/env.h"

namespace revive {
namespace {

// Large files are written back while they are written, and their pages dropped from the page cache as
// soon as they are on disk (sync_file_range + POSIX_FADV_DONTNEED, a window of three chunks). Measured on
// this VM (docs/performance.md): buffered writes of a 1 GiB file into fresh page cache ran at 100-250 MB/s
// because every new page-cache page was a guest page the balloon's free page reporting had returned to
// the host (each first touch is a host fault); rewriting a file in place (O_TRUNC, the old raw baseline)
// recycles its own warm pages and reached ~900 MB/s. A checkpoint must keep the previous version until
// the new one is durable, so it cannot recycle that way; streaming keeps its page-cache footprint at three
// chunks that are reused at once, and leaves almost nothing for the final fsync. It also keeps
// checkpoint data from evicting the application's own cached files.
constexpr off_t kWritebackChunk = off_t{8} << 20;

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, bool recycled = false)
      : path_(std::move(path)), fd_(fd), recycled_(recycled), stream_ok_(!recycled) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Append(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      // At most one writeback chunk per call, so writeback is started at every chunk boundary.
      size_t chunk = n < static_cast<size_t>(kWritebackChunk) ? n : static_cast<size_t>(kWritebackChunk);
      ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno("write " + path_, errno);
      }
      if (w == 0) return Status::IOError("write " + path_ + ": wrote 0 bytes");
      p += w;
      n -= static_cast<size_t>(w);
      pos_ += w;
      if (pos_ - started_ >= kWritebackChunk) {
        Status s = Stream();
        if (!s.ok()) return s;
      }
    }
    return Status::OK();
  }
  Status Sync() override {
    // A recycled file may be longer than what was written into it now.
    if (recycled_ && ::ftruncate(fd_, pos_) != 0) return Status::FromErrno("ftruncate " + path_, errno);
    if (::fsync(fd_) != 0) return Status::FromErrno("fsync " + path_, errno);
    // Everything is on disk now: drop what streaming has not dropped yet (large files only; small files
    // such as manifests are read back soon and cost nothing to keep).
    if (streamed_) ::posix_fadvise(fd_, dropped_, 0, POSIX_FADV_DONTNEED);
    return Status::OK();
  }
  Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return Status::FromErrno("close " + path_, errno);
    return Status::OK();
  }

 private:
  // Starts writeback of [started_, pos_), then waits for what is more than two chunks behind and drops
  // its pages (so up to three chunks are in flight: measured slightly faster than one behind, noisy).
  // Only a hint for speed: a file system without sync_file_range falls back to the final fsync, which
  // alone makes the file durable and reports its errors. An I/O error is reported here already.
  Status Stream() {
    if (!stream_ok_) return Status::OK();
    if (::sync_file_range(fd_, started_, pos_ - started_, SYNC_FILE_RANGE_WRITE) != 0) return StreamFailed("start");
    streamed_ = true;
    started_ = pos_;
    const off_t upto = started_ - 2 * kWritebackChunk;
    if (upto > dropped_) {
      if (::sync_file_range(fd_, dropped_, upto - dropped_,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0)
        return StreamFailed("wait for");
      ::posix_fadvise(fd_, dropped_, upto - dropped_, POSIX_FADV_DONTNEED);
      dropped_ = upto;
    }
    return Status::OK();
  }
  Status StreamFailed(const char* what) {
    int err = errno;
    if (err == EIO || err == ENOSPC || err == EDQUOT)
      return Status::FromErrno(std::string("sync_file_range (") + what + " writeback) " + path_, err);
    stream_ok_ = false;  // not supported here (ESPIPE, EINVAL, ENOSYS, ...): plain write + fsync
    return Status::OK();
  }

  std::string path_;
  int fd_;
  off_t pos_ = 0;      // bytes written so far
  off_t started_ = 0;  // writeback started for [.., started_)
  off_t dropped_ = 0;  // on disk and dropped from the page cache: [0, dropped_)
  bool recycled_ = false;  // opened without O_TRUNC: its warm pages are overwritten, not dropped
  bool stream_ok_ = true;
  bool streamed_ = false;
};

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  Status Read(void* buf, size_t n, size_t* got) override {
    for (;;) {
      ssize_t r = ::read(fd_, buf, n < (size_t{1} << 30) ? n : (size_t{1} << 30));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno("read " + path_, errno);
      *got = static_cast<size_t>(r);
      return Status::OK();
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixEnv : public Env {
 public:
  Status NewWritableFile(const std::string& path, std::unique_ptr<WritableFile>* out) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno("open " + path, errno);
    out->reset(new PosixWritableFile(path, fd));
    return Status::OK();
  }
  Status NewRecycledFile(const std::string& path, std::unique_ptr<WritableFile>* out) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno("open " + path, errno);
    out->reset(new PosixWritableFile(path, fd, true));
    return Status::OK();
  }
  Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open " + path, errno);
    out->reset(new PosixSequentialFile(path, fd));
    return Status::OK();
  }
  Status GetFileSize(const std::string& path, uint64_t* size) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("stat " + path, errno);
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }
  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Status::FromErrno("rename " + from + " -> " + to, errno);
    return Status::OK();
  }
  Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Status::FromErrno("unlink " + path, errno);
    return Status::OK();
  }
  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0) return Status::OK();
    int err = errno;
    struct stat st;
    if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::OK();
    return Status::FromErrno("mkdir " + path, err);
  }
  Status DeleteDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return Status::FromErrno("rmdir " + path, errno);
    return Status::OK();
  }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = ::opendir(dir.c_str());
    if (!d) return Status::FromErrno("opendir " + dir, errno);
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names->push_back(std::move(n));
    }
    ::closedir(d);
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open directory " + dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return Status::FromErrno("fsync directory " + dir, err);
    return Status::OK();
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv;  // leaked on purpose: usable from any static destructor
  return env;
}

}  // namespace revive
