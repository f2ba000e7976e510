// Env: the filesystem operations the checkpoint storage needs, behind an interface (LevelDB's idea), so
// tests can inject failures (fault_env.h) at every step of writing a version.
#ifndef REVIVE_CORE_ENV_H_
#define REVIVE_CORE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all n bytes (looping over short writes) or fails naming the file.
  virtual Status Append(const void* data, size_t n) = 0;
  virtual Status Sync() = 0;  // fdatasync is not enough: the size must be durable too, so fsync
  virtual Status Close() = 0;
};

class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to n bytes; *got == 0 means end of file.
  virtual Status Read(void* buf, size_t n, size_t* got) = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // The process-wide POSIX implementation (never destroyed).
  static Env* Default();

  // Creates or truncates.
  virtual Status NewWritableFile(const std::string& path, std::unique_ptr<WritableFile>* out) = 0;
  // Overwrites `path` in place, creating it if missing: no truncation first, the file is cut to what was
  // written at Sync(). A file recycled from an old version keeps its pages, which on tmpfs (node-local
  // checkpoints) and on this VM's page cache is the difference between memory speed and a host fault per
  // fresh page (docs/performance.md). The default is NewWritableFile.
  virtual Status NewRecycledFile(const std::string& path, std::unique_ptr<WritableFile>* out) {
    return NewWritableFile(path, out);
  }
  virtual Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) = 0;
  virtual Status GetFileSize(const std::string& path, uint64_t* size) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual Status DeleteFile(const std::string& path) = 0;
  virtual Status CreateDir(const std::string& path) = 0;  // OK if it already exists as a directory
  virtual Status DeleteDir(const std::string& path) = 0;  // must be empty
  // Names in dir without "." and "..".
  virtual Status GetChildren(const std::string& dir, std::vector<std::string>* names) = 0;
  // fsync of the directory itself, so entries created/renamed in it are durable.
  virtual Status SyncDir(const std::string& dir) = 0;
};

// mkdir -p (each created level's parent is fsynced so the new entry survives a crash).
Status CreateDirs(Env* env, const std::string& path);
// Deletes every file in dir, then dir (one level; checkpoint version directories are flat).
Status DeleteDirTree(Env* env, const std::string& dir);
// Reads a whole (small) file.
Status ReadFileToString(Env* env, const std::string& path, std::string* out);
// tmp + write + fsync + close + rename + fsync(dir): after OK the file is durable with exactly `data`,
// and a crash at any instant leaves either the old file (or none) or the new one.
Status WriteFileAtomic(Env* env, const std::string& path, const std::string& data);

}  // namespace revive

#endif  // REVIVE_CORE_ENV_H_
