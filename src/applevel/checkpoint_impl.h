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
#include "applevel/heartbeat.h"
#include "applevel/interval.h"
#include "applevel/multilevel.h"
#include "revive/checkpoint.hpp"
#include "storage/data_file.h"
#include "storage/distribution.h"
#include "storage/shared_file.h"
#include "storage/version_store.h"

namespace revive {

class Checkpoint::Impl {
 public:
  // How a key's data relates across ranks (add / add_distributed / add_replicated).
  enum class Layout { kPrivate, kDistributed, kReplicated };
  struct Entry {
    std::string key;
    std::shared_ptr<detail::Item> item;
    Layout layout = Layout::kPrivate;
    storage::Block block;       // kDistributed: this rank's, in units
    storage::Distribution dist;  // kDistributed: global size, unit; every rank's block once committed
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
    std::string shared_path;                 // shared-file mode: the version's one file
    std::vector<storage::RankRange> ranges;  // shared-file mode, rank 0: every rank's bytes in it
  };
  // Shared-file mode, restart: this rank's verified bytes, kept from VerifyLocal for ReadLocal.
  struct SharedRecord {
    std::string what;  // "<file>: rank R's record of key 'k'", for errors
    storage::FileHeader header;
    const char* payload = nullptr;
  };

  Impl(std::string name, std::shared_ptr<detail::Comm> comm, Options opts);
  ~Impl();
  std::string Where() const;
  void Add(const std::string& key, std::shared_ptr<detail::Item> item);
  // add_distributed / add_replicated: the key added last gets its layout.
  void SetLayout(const std::string& key, Layout layout, storage::Block block, uint64_t global_n, uint64_t unit);
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
  // Shared-file mode (opts.mpiio with a Comm that offers it, i.e. the MPI flavour); null otherwise.
  std::shared_ptr<storage::SharedFileIO> shared_io;
  // Restart of a version written in shared-file mode (whatever opts.mpiio says now): opened when needed.
  std::shared_ptr<storage::SharedFileIO> read_io;
  // Multi-level storage (Options::levels); null: every version goes to `store` only.
  std::unique_ptr<applevel::MultiLevel> ml;
  // Collective: publishes a finished background flush to the global level (wait: waits for it first).
  void PollFlush(bool wait);

  // Time-based interval (Options::interval / interval_auto); disabled otherwise.
  applevel::IntervalSchedule sched;
  // Options::heartbeat_dir: made at Commit; null without one.
  std::unique_ptr<applevel::Heartbeat> heartbeat;
  // update_and_write's test, inlined into it: a clock read and compare for the heartbeat, then the rule.
  bool Due(int64_t it, int64_t every) {
    if (heartbeat) heartbeat->Beat();
    if (sched.enabled() && !sched.started()) sched.Start(it, applevel::MonotonicNs());
    return sched.Due(it, every);
  }
  // [Update() +] Write(it), timed when an interval is set; then, collectively, the ranks agree on the
  // measured figures and the next write's iteration.
  void WriteNow(int64_t it, bool update);
  // Update() / Wait(), their time counted as checkpoint cost when an interval is set.
  void TimedUpdate();
  void TimedWait();

 private:
  std::unique_ptr<Job> Take();
  void TakeName();
  uint64_t NextVersion();
  void RunJob(Job* job);
  void RunSharedJob(Job* job);
  Status VerifyShared(uint64_t v, const storage::Manifest& m);
  Status VerifyVersion(uint64_t v, storage::Manifest* m);
  Status ReadShared();
  void Finish(std::unique_ptr<Job> job);
  storage::Manifest MakeManifest(const Job& job) const;
  storage::Layouts MakeLayouts() const;  // redistribute.cc
  Status VerifyLocal(uint64_t v, storage::Manifest* m);
  // redistribute.cc. Commit: every rank's blocks of the distributed keys, checked to tile their arrays.
  void GatherLayouts();
  // Whether version m can be read by this run's ranks and layouts (InvalidArgument naming the key if not).
  Status CheckLayouts(const storage::Manifest& m, const std::string& vdir) const;
  // Entry e must be read from other ranks' files than this rank's own (another rank count or block).
  bool Redistributes(const storage::Manifest& m, const Entry& e) const;
  // Opens the old ranks' files that hold parts of e's block (headers checked), then reads those parts.
  struct Part {
    std::unique_ptr<storage::DataFileReader> reader;
    uint64_t src = 0, dst = 0, len = 0;  // bytes
  };
  Status OpenParts(uint64_t v, const storage::Manifest& m, const Entry& e, std::vector<Part>* parts);
  static Status ReadParts(Entry& e, std::vector<Part>& parts);
  // want_count: the element count the file must hold (default: the item's, unless it is resizable).
  static Status CheckType(const storage::FileHeader& h, const std::string& where, detail::Item& item,
                          const std::string& key, const uint64_t* want_count = nullptr);
  Status ReadLocal(uint64_t v, const storage::Manifest& m, bool* clobbered);
  // This rank's records (data files concatenated, in key order) in `buf`, checked against the keys and the
  // registered items; fills shared_records for ReadShared. `what` names the bytes in errors.
  Status ParseRecords(const std::string& what, const char* buf, size_t n, const std::vector<std::string>& keys);
  void WriteMulti(std::unique_ptr<Job> job, unsigned levels);
  void InvalidateChildren();
  // A version was written or read: the heartbeat file's content names it.
  void Recorded();
  void LogInterval(int64_t it, const applevel::IntervalSchedule::Sample& agreed) const;
  // Restart from the local levels: version v (collective); false if it cannot be had there.
  bool RestoreMulti(uint64_t v, uint64_t want_parent, bool* clobbered, std::string* why, storage::Manifest* m);

  std::unique_ptr<Job> staged;   // taken by update() in async copy mode
  std::unique_ptr<Job> pending;  // submitted to the writer, not yet published
  std::vector<std::string> spare;  // async copy mode: buffers of the last version, reused by Take()
  bool hooks_called = false;  // update() already ran the user hooks for the next version
  std::string registered;     // key in the process-wide registry of written checkpoints (TakeName)
  std::unique_ptr<char[]> shared_buf;  // shared-file restart: this rank's range, between verify and read
  std::vector<SharedRecord> shared_records;  // into shared_buf, one per entry (registration order)
  applevel::AsyncWriter writer;  // last member: its thread stops before the rest is destroyed
};

}  // namespace revive

#endif  // REVIVE_APPLEVEL_CHECKPOINT_IMPL_H_
