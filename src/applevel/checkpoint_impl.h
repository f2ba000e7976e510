// Checkpoint::Impl: the state behind revive::Checkpoint (shared by checkpoint.cc and c_api.cc).
#ifndef REVIVE_APPLEVEL_CHECKPOINT_IMPL_H_
#define REVIVE_APPLEVEL_CHECKPOINT_IMPL_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "applevel/async_writer.h"
#include "applevel/comm.h"
#include "applevel/env_hook.h"
#include "revive/checkpoint.hpp"
#include "storage/data_file.h"
#include "storage/version_store.h"

namespace revive {

class Checkpoint::Impl {
 public:
  struct Entry {
    std::string key;
    std::shared_ptr<detail::Item> item;
  };
  // One data file to write. Heap-allocated so `scratch` (which spans may point into) never moves.
  struct FileJob {
    std::string key;
    std::string path;
    storage::FileHeader header;
    std::string scratch;
    std::vector<storage::Span> spans;
  };
  struct Job {
    uint64_t version = 0;
    int64_t iteration = 0;
    uint64_t parent_version = 0;
    std::vector<std::unique_ptr<FileJob>> files;
    Status result;  // set by RunJob (possibly on the writer thread)
    bool publish_in_writer = false;  // RunJob publishes (serial, no children); else Finish does
    Status published;                // RunJob's publication result when publish_in_writer
  };

  Impl(std::string name, std::shared_ptr<detail::Comm> comm, Options opts);
  std::string Where() const;
  void Add(const std::string& key, std::shared_ptr<detail::Item> item);
  void Commit();
  void RequireCommitted(const char* what) const;
  void Update();
  void Write(int64_t iteration);
  // Waits for the pending write (if any) and publishes it.
  void Wait();
  // Wait() and also any background deletion of old versions: before the store's directories are
  // changed from this thread, and before destruction.
  void Drain();
  bool RestartIfNeeded(int64_t* iteration);

  std::string name;
  Options opts;
  std::shared_ptr<detail::Comm> comm;
  Env* env;
  storage::VersionStore store;
  std::vector<Entry> entries;
  bool committed = false;
  bool touched = false;  // wrote or read a version in this run
  uint64_t version = 0;
  int64_t iteration = 0;
  int64_t last_iteration = 0;
  Impl* parent = nullptr;
  std::vector<Impl*> children;

 private:
  std::unique_ptr<Job> Take();
  uint64_t NextVersion();
  void RunJob(Job* job);
  void Finish(std::unique_ptr<Job> job);
  storage::Manifest MakeManifest(const Job& job) const;
  Status VerifyLocal(uint64_t v, storage::Manifest* m);
  static Status CheckType(const storage::DataFileReader& r, detail::Item& item, const std::string& key);
  Status ReadLocal(uint64_t v);

  std::unique_ptr<Job> staged;   // taken by update() in async copy mode
  std::unique_ptr<Job> pending;  // submitted to the writer, not yet published
  std::vector<std::string> spare;
  bool hooks_called = false;  // update() already ran the user hooks for the next version  // async copy mode: buffers of the last version, reused by Take()
  applevel::AsyncWriter writer;  // last member: its thread stops before the rest is destroyed
};

}  // namespace revive

#endif  // REVIVE_APPLEVEL_CHECKPOINT_IMPL_H_
