// POSIX implementation of Env.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "core/env.h"

namespace revive {
namespace {

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Append(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      // Linux transfers at most 0x7ffff000 bytes per call; ask for at most 1 GiB.
      size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
      ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno("write " + path_, errno);
      }
      if (w == 0) return Status::IOError("write " + path_ + ": wrote 0 bytes");
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::OK();
  }
  Status Sync() override {
    if (::fsync(fd_) != 0) return Status::FromErrno("fsync " + path_, errno);
    return Status::OK();
  }
  Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return Status::FromErrno("close " + path_, errno);
    return Status::OK();
  }

 private:
  std::string path_;
  int fd_;
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
