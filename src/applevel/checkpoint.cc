// revive::Checkpoint: registration, versioned writes (sync/async), restart with collective agreement,
// nested checkpoints.
#include "applevel/checkpoint_impl.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>

#include "applevel/type_names.h"

namespace revive {
namespace applevel {
namespace {
std::atomic<Env*> g_env{nullptr};
}  // namespace
void SetEnvForTesting(Env* env) { g_env = env; }
Env* CheckpointEnv() {
  Env* e = g_env;
  return e ? e : Env::Default();
}

// A key/name becomes a file/directory name: keep it to a portable, unambiguous set.
bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > storage::kMaxKeyLength || s[0] == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+'))
      return false;
  return s.compare(0, 8, storage::kManifestName) != 0;  // MANIFEST and MANIFEST.tmp are ours
}

// Live checkpoints of this process, by directory and rank (the rank: tests simulate ranks with threads of
// one process). Two live objects with the same directory would write the same version numbers.
std::mutex g_names_mu;
std::set<std::string>& LiveNames() {
  static auto* names = new std::set<std::string>;  // never destroyed: checkpoints may outlive main's statics
  return *names;
}

// A relative base path is resolved once, at construction: a later chdir() of the program must not move
// its checkpoints.
Options Resolve(Options o) {
  if (o.base_path.empty()) throw Error("checkpoint base path is empty");
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(o.base_path, ec);
  if (!ec) {
    std::string s = p.lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    o.base_path = s;
  }
  return o;
}
}  // namespace applevel

using applevel::ValidName;

Checkpoint::Impl::Impl(std::string n, std::shared_ptr<detail::Comm> c, Options o)
    : name(std::move(n)),
      opts(applevel::Resolve(std::move(o))),
      comm(c ? std::move(c) : detail::serial_comm()),
      env(applevel::CheckpointEnv()),
      store(env, opts.base_path + "/" + name),
      sched(opts.interval, opts.interval_auto, opts.mtbf),
      writer(opts.async_thread_cpu) {
  if (opts.zero_copy) opts.async = true;
  if (!(opts.interval >= 0))
    throw Error(Where() + ": interval (REVIVE_CP_INTERVAL) must be a number of seconds >= 0 (0 = off), got " +
                std::to_string(opts.interval));
  if (opts.interval_auto && !(opts.mtbf > 0))
    throw Error(Where() + ": REVIVE_CP_INTERVAL=auto (Options::interval_auto) needs the mean time between failures: "
                "set REVIVE_MTBF (Options::mtbf) to a number of seconds > 0" +
                (opts.mtbf == 0 ? std::string(" (it is not set)") : ", got " + std::to_string(opts.mtbf)));
  if (opts.keep < 1) throw Error("checkpoint '" + name + "': keep must be >= 1 (got " + std::to_string(opts.keep) + ")");
  if (!ValidName(name))
    throw Error("checkpoint name '" + name + "' is not a valid directory name (use letters, digits, _ - . +)");
  applevel::LevelPolicy policy;
  Status ps = applevel::LevelPolicy::Parse(opts.levels, &policy);
  if (!ps.ok()) throw Error(Where() + ": " + ps.message());
  if (policy.multilevel())
    ml = std::make_unique<applevel::MultiLevel>(env, opts, name, store.dir(), comm.get(), std::move(policy));
  if (opts.mpiio) shared_io = comm->open_shared_file_io();  // collective; null for a serial Comm
  std::string level;
  if (shared_io && opts.async && !shared_io->ThreadsAllowed(&level))
    throw Error(Where() + ": shared-file mode (Options::mpiio, REVIVE_MPIIO) with async writing runs MPI-IO on "
                "the writer thread and needs MPI_THREAD_MULTIPLE, but MPI was initialised with " + level +
                ": initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or write synchronously");
}

// Taken at the first write: two objects may read the same checkpoint (a restart check next to the writer),
// but two that write it would number their versions alike and overwrite each other's.
void Checkpoint::Impl::TakeName() {
  if (!registered.empty()) return;
  std::string key = store.dir() + "\n" + std::to_string(comm->rank());
  std::lock_guard<std::mutex> l(applevel::g_names_mu);
  if (!applevel::LiveNames().insert(key).second)
    throw Error(Where() + ": another Checkpoint object with this name and base path has written in this process "
                "and is still alive; both would write the same versions (destroy the first one, or use another name)");
  registered = std::move(key);
}

Checkpoint::Impl::~Impl() {
  if (registered.empty()) return;
  std::lock_guard<std::mutex> l(applevel::g_names_mu);
  applevel::LiveNames().erase(registered);
}

std::string Checkpoint::Impl::Where() const { return "checkpoint '" + name + "' (" + store.dir() + ")"; }

void Checkpoint::Impl::Add(const std::string& key, std::shared_ptr<detail::Item> item) {
  if (committed) throw Error(Where() + ": add('" + key + "') after commit()");
  if (!ValidName(key))
    throw Error(Where() + ": key '" + key + "' is not a valid file name (use letters, digits, _ - . +)");
  for (const auto& e : entries)
    if (e.key == key) throw Error(Where() + ": key '" + key + "' added twice");
  if (!item) throw Error(Where() + ": key '" + key + "': null object");
  entries.push_back({key, std::move(item), Layout::kPrivate, {}, {}});
}

void Checkpoint::Impl::Commit() {
  if (committed) throw Error(Where() + ": commit() called twice");
  Status s = store.Init();
  // Agree, so that no rank goes on alone when another cannot create the directory.
  if (!comm->allreduce_and(s.ok()))
    throw Error(Where() + ": cannot create the checkpoint directory: " +
                (s.ok() ? std::string("failed on another rank") : s.ToString()));
  GatherLayouts();  // collective; throws alike on every rank when the blocks do not tile their array
  committed = true;
  if (!opts.heartbeat_dir.empty())
    heartbeat = std::make_unique<applevel::Heartbeat>(opts.heartbeat_dir, comm->rank(), name);
  if (opts.async && !opts.zero_copy) {
    // Async copy mode copies into buffers that are reused from version to version. Allocate and touch
    // them now, outside the application's loop: on this VM a first touch of fresh memory costs a host
    // fault per page (150-700 MB/s measured), which made the first copy of a 16 MB Lanczos checkpoint
    // several times slower than the memcpy itself. Only for plain memory (vectors, arrays), whose size
    // is known without calling user code.
    spare.resize(entries.size());
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].item->direct()) spare[i].resize(entries[i].item->count() * entries[i].item->type().elem_size);
  }
}

void Checkpoint::Impl::RequireCommitted(const char* what) const {
  if (!committed) throw Error(Where() + ": " + what + " before commit()");
}

std::unique_ptr<Checkpoint::Impl::Job> Checkpoint::Impl::Take() {
  auto job = std::make_unique<Job>();
  bool copy = opts.async && !opts.zero_copy;
  for (auto& e : entries) {
    if (!hooks_called) e.item->update();
    // The manifest records the block registered at commit(); a vector that no longer has its size there
    // would be restored into another block.
    if (e.layout == Layout::kDistributed && e.item->count() != e.block.count * e.dist.unit)
      throw Error(Where() + ": distributed key '" + e.key + "' holds " + std::to_string(e.item->count()) +
                  " elements but was registered with " + std::to_string(e.block.count * e.dist.unit));
    auto f = std::make_unique<FileJob>();
    f->key = e.key;
    detail::TypeDesc t = e.item->type();
    f->header.key = e.key;
    f->header.type_tag = t.tag;
    f->header.elem_size = t.elem_size;
    std::vector<detail::ByteSpan> spans;
    e.item->gather(spans, f->scratch);
    uint64_t bytes = 0;
    for (const auto& sp : spans) bytes += sp.size;
    f->header.count = t.tag == detail::kTagBlob ? bytes : e.item->count();
    if (copy) {
      // Async copy mode: the user may modify their data as soon as write() returns. The buffer of the
      // previous version is reused: its pages are already mapped, so the copy runs at memcpy speed.
      std::string owned;
      size_t i = job->files.size();
      if (i < spare.size()) owned.swap(spare[i]);
      owned.resize(bytes);
      size_t at = 0;
      for (const auto& sp : spans) {
        if (sp.size) std::memcpy(owned.data() + at, sp.data, sp.size);
        at += sp.size;
      }
      f->scratch = std::move(owned);
      f->spans.push_back({f->scratch.data(), f->scratch.size()});
    } else {
      for (const auto& sp : spans) f->spans.push_back({sp.data, sp.size});
    }
    job->files.push_back(std::move(f));
  }
  hooks_called = false;
  return job;
}

void Checkpoint::Impl::Update() {
  RequireCommitted("update()");
  Wait();
  if (opts.async && !opts.zero_copy) {
    staged = Take();  // Take() calls the user hooks
  } else {
    for (auto& e : entries) e.item->update();
    hooks_called = true;  // the next Take() must not call them again
  }
}

uint64_t Checkpoint::Impl::NextVersion() {
  uint64_t next = 0;
  if (comm->rank() == 0) {
    std::vector<uint64_t> dirs;
    Status s = store.ListVersionDirs(&dirs);
    if (!s.ok()) std::fprintf(stderr, "revive: %s: %s\n", Where().c_str(), s.ToString().c_str());
    uint64_t m = version;
    if (!dirs.empty() && dirs.back() > m) m = dirs.back();
    next = m + 1;
  }
  comm->bcast(&next, sizeof next, 0);
  // Never a number that some node still holds pieces of (left by a run that did not restart from them).
  if (ml) next = std::max(next, ml->NewestLocal() + 1);
  return next;
}

void Checkpoint::Impl::Write(int64_t it) {
  RequireCommitted("write()");
  TakeName();  // before any collective: every rank throws alike
  Drain();  // a background prune must not run while the next version's directory is made
  std::unique_ptr<Job> job = staged ? std::move(staged) : Take();
  job->version = NextVersion();
  job->iteration = it;
  job->parent_version = parent ? parent->version : 0;
  if (ml) {
    PollFlush(false);  // reap a finished background flush (and say if it failed), without waiting
    const unsigned levels = ml->policy().LevelsFor(job->version);
    if (levels & applevel::kL1) return WriteMulti(std::move(job), levels);
  }
  // Serial and without children, the writer thread can also publish the version (four fsyncs of the
  // directories and the manifest), so in async mode none of that runs on the application thread. With
  // several ranks publishing needs the collective agreement, and a parent's version number must change
  // together with its publication (children record it), so those publish in Finish().
  job->publish_in_writer = comm->size() == 1 && children.empty();
  // Paths are made here: the writer thread must not call into the Comm (MPI may not allow it).
  for (auto& f : job->files) f->path = store.DataPath(job->version, f->key, comm->rank(), comm->size());
  if (shared_io) job->shared_path = store.VersionDir(job->version) + "/" + storage::kSharedFileName;
  if (comm->rank() == 0) job->result = store.BeginVersion(job->version);
  // The others write into the directory rank 0 created; its failure is reported in Finish().
  if (!comm->allreduce_and(job->result.ok())) {
    Status s = job->result;
    throw Error(Where() + ": cannot create version " + std::to_string(job->version) + ": " +
                (s.ok() ? "failed on rank 0" : s.ToString()));
  }
  if (opts.async) {
    Job* j = job.get();
    pending = std::move(job);
    writer.Submit([this, j] { RunJob(j); });
  } else {
    RunJob(job.get());
    Finish(std::move(job));
  }
}

void Checkpoint::Impl::RunJob(Job* job) {
  int level = opts.compress ? opts.compress_level : 0;
  if (shared_io) {
    RunSharedJob(job);
  } else {
    for (auto& f : job->files) {
      job->result = storage::WriteDataFile(env, f->path, f->header, f->spans, level);
      if (!job->result.ok()) return;
    }
  }
  if (job->result.ok() && job->publish_in_writer) job->published = store.Publish(MakeManifest(*job));
}

// Shared-file mode: this rank's records (the files it would write otherwise, in key order) go into the
// version's one file at the exclusive prefix sum of the ranks' sizes; one collective write, then sync.
void Checkpoint::Impl::RunSharedJob(Job* job) {
  int level = opts.compress ? opts.compress_level : 0;
  std::vector<std::unique_ptr<storage::EncodedRecord>> records;
  std::vector<storage::Span> spans;
  Checksum64Stream region;
  Status s;
  for (auto& f : job->files) {
    auto r = std::make_unique<storage::EncodedRecord>();
    s = storage::EncodeDataRecord(job->shared_path + " (key '" + f->key + "')", f->header, f->spans, level, r.get(),
                                  &region);
    if (!s.ok()) break;
    spans.insert(spans.end(), r->spans.begin(), r->spans.end());
    records.push_back(std::move(r));
  }
  if (!s.ok()) spans.clear();  // still take part in the collective write (with nothing), or the others hang
  Status w = shared_io->Write(job->shared_path, spans, region.Digest(), &job->ranges);
  job->result = s.ok() ? w : s;
}

storage::Manifest Checkpoint::Impl::MakeManifest(const Job& job) const {
  storage::Manifest m;
  m.name = name;
  m.version = job.version;
  m.iteration = job.iteration;
  m.parent_version = job.parent_version;
  m.ranks = static_cast<uint32_t>(comm->size());
  for (const auto& f : job.files) m.keys.push_back(f->key);
  m.layouts = MakeLayouts();
  if (shared_io) {
    m.shared_file = storage::kSharedFileName;
    m.ranges = job.ranges;
  }
  return m;
}

// Only the pending write: a background prune (see Finish) may still run afterwards. wait() is what a
// zero-copy application calls before every modification of its data, so it must not also wait for the
// deletion of old versions (measured: that put a directory fsync and the unlinks on Lanczos' critical path).
void Checkpoint::Impl::Wait() {
  if (!pending) return;
  writer.Wait();
  Finish(std::move(pending));
}

void Checkpoint::Impl::Drain() {
  writer.Wait();
  if (pending) Finish(std::move(pending));
}

void Checkpoint::Impl::Finish(std::unique_ptr<Job> job) {
  std::string v = std::to_string(job->version);
  std::string keep_msg = version ? "; version " + std::to_string(version) + " is still the newest" : "";
  if (!comm->allreduce_and(job->result.ok()))
    throw Error(Where() + ": writing version " + v + " failed: " +
                (job->result.ok() ? "on another rank" : job->result.ToString()) + keep_msg);
  Status s = job->published;
  if (comm->rank() == 0 && !job->publish_in_writer) s = store.Publish(MakeManifest(*job));
  if (!comm->allreduce_and(s.ok()))
    throw Error(Where() + ": publishing version " + v + " failed: " +
                (s.ok() ? "on rank 0" : s.ToString()) + keep_msg);
  version = job->version;
  iteration = job->iteration;
  touched = true;
  Recorded();
  if (opts.verbose && comm->rank() == 0)
    std::fprintf(stderr, "revive: %s: wrote version %s (iteration %lld)\n", Where().c_str(), v.c_str(),
                 static_cast<long long>(iteration));
  if (opts.async && !opts.zero_copy) {
    spare.clear();
    for (auto& f : job->files) spare.push_back(std::move(f->scratch));
  }
  // A complete version exists now; the older ones are deleted on the writer thread, off the
  // application's critical path (deleting a large file costs as much as several fsyncs). The next write,
  // wait() or the destructor waits for it.
  if (comm->rank() == 0) {
    writer.Submit([this] {
      Status ps = store.Prune(opts.keep);
      if (!ps.ok()) std::fprintf(stderr, "revive: %s: removing old versions: %s\n", Where().c_str(), ps.ToString().c_str());
    });
  }
  InvalidateChildren();
}

// A complete parent version invalidates everything its children wrote before (paper Table I). The
// children's manifests record the parent version, so restart is correct even if this cleanup is cut
// short by a crash; deleting them only frees the space.
void Checkpoint::Impl::InvalidateChildren() {
  for (Impl* c : children) {
    c->Drain();  // its own prune must not delete the same directories concurrently
    if (comm->rank() != 0) continue;
    std::vector<uint64_t> dirs;
    Status cs = c->store.ListVersionDirs(&dirs);
    for (uint64_t cv : dirs)
      if (cs.ok()) cs = c->store.RemoveVersion(cv);
    if (!cs.ok()) std::fprintf(stderr, "revive: %s: invalidating child versions: %s\n", c->Where().c_str(), cs.ToString().c_str());
  }
}

// Checks that version v's manifest is usable by this rank and matches the program's keys and rank count
// (ReadLocal checks the data while it reads it). InvalidArgument = the program does not match the checkpoint (an error, never a fallback);
// anything else = the version is damaged.
Status Checkpoint::Impl::VerifyLocal(uint64_t v, storage::Manifest* m) {
  Status s = store.ReadManifest(v, m);
  if (!s.ok()) return s;
  std::string vdir = store.VersionDir(v);
  if (m->name != name)
    return Status::Corruption(vdir + "/" + storage::kManifestName + ": belongs to checkpoint '" + m->name + "'");
  for (const auto& e : entries)
    if (std::find(m->keys.begin(), m->keys.end(), e.key) == m->keys.end())
      return Status::InvalidArgument("key '" + e.key + "' is registered but " + vdir + " does not contain it");
  for (const auto& k : m->keys) {
    bool found = false;
    for (const auto& e : entries) found = found || e.key == k;
    if (!found) return Status::InvalidArgument(vdir + " contains key '" + k + "' that the program did not add");
  }
  // Another number of ranks (or other blocks) is fine when every key is distributed or replicated.
  return CheckLayouts(*m, vdir);
}

// VerifyLocal, then in shared-file mode the data: the shared file is read collectively, so every rank takes
// part in the same steps whatever its manifest said. OK with a failure elsewhere means "usable here" (the caller agrees).
Status Checkpoint::Impl::VerifyVersion(uint64_t v, storage::Manifest* m) {
  shared_records.clear();
  shared_buf.reset();
  Status s = VerifyLocal(v, m);
  if (!comm->allreduce_and(s.ok())) return s;
  const bool shared = !m->shared_file.empty();
  if (comm->allreduce_and(shared)) return VerifyShared(v, *m);
  if (shared)
    return Status::Corruption(store.VersionDir(v) + "/" + storage::kManifestName +
                              " names a shared file, another rank's manifest does not");
  return Status::OK();  // per-rank files: ReadLocal checks them as it reads them
}

// Shared-file mode: reads this rank's range of the version's file (collectively), checks it against the
// manifest's checksum, parses its records and checks them against the registered keys. The bytes are kept
// for ReadLocal, so user memory is only written once the version verified on every rank.
Status Checkpoint::Impl::VerifyShared(uint64_t v, const storage::Manifest& m) {
  const std::string path = store.VersionDir(v) + "/" + m.shared_file;
  const std::string who = "rank " + std::to_string(comm->rank());
  const storage::RankRange range = m.ranges[static_cast<size_t>(comm->rank())];
  Status s;
  // A version written in shared-file mode is readable whatever this run's option (collective: every rank
  // gets here). Only a Comm without MPI-IO (serial) cannot read it, on every rank alike.
  if (!read_io) read_io = shared_io ? shared_io : comm->open_shared_file_io();
  if (!read_io)
    return Status::InvalidArgument(path + ": version " + std::to_string(v) +
                                   " was written in shared-file mode (MPI-IO); only the MPI flavour can read it");
  // No zero fill: every byte is read over.
  shared_buf = std::make_unique_for_overwrite<char[]>(range.length ? range.length : 1);
  s = read_io->Read(path, range, shared_buf.get());
  const std::string bytes = who + "'s bytes [" + std::to_string(range.offset) + ", " +
                            std::to_string(range.offset + range.length) + ")";
  if (s.ok() && Checksum64(shared_buf.get(), range.length) != range.checksum)
    s = Status::Corruption(path + ": " + bytes + ": checksum mismatch (data corrupted)");
  if (s.ok()) s = ParseRecords(path + ": " + who, shared_buf.get(), range.length, m.keys);
  if (!s.ok()) shared_buf.reset();
  return s;
}

Status Checkpoint::Impl::ParseRecords(const std::string& what, const char* buf, size_t n,
                                      const std::vector<std::string>& keys) {
  Status s;
  std::vector<SharedRecord> recs;
  size_t pos = 0;
  for (size_t i = 0; s.ok() && i < keys.size(); ++i) {
    SharedRecord r;
    r.what = what + "'s record of key '" + keys[i] + "'";
    size_t used = 0;
    s = storage::ParseDataRecord(r.what, buf + pos, n - pos, &r.header, &r.payload, &used);
    if (s.ok() && r.header.key != keys[i])
      s = Status::Corruption(r.what + ": holds key '" + r.header.key + "'");
    pos += used;
    recs.push_back(std::move(r));
  }
  if (s.ok() && pos != n) s = Status::Corruption(what + "'s bytes: trailing bytes after the records");
  // In registration order, for ReadLocal.
  for (size_t i = 0; s.ok() && i < entries.size(); ++i) {
    const auto& e = entries[i];
    auto it = std::find_if(recs.begin(), recs.end(), [&](const SharedRecord& r) { return r.header.key == e.key; });
    if (it == recs.end()) {
      s = Status::InvalidArgument("key '" + e.key + "' is registered but " + what + "'s bytes do not contain it");
      break;
    }
    s = CheckType(it->header, it->what, *e.item, e.key);
    // Node-local pieces do not record blocks: a distributed key of another size there was written with
    // another decomposition, which only the global level's manifest describes (a fallback, not an error).
    if (s.ok() && e.layout == Layout::kDistributed && it->header.count != e.block.count * e.dist.unit)
      s = Status::Corruption(it->what + ": holds " + std::to_string(it->header.count) + " elements, this rank's "
                             "block has " + std::to_string(e.block.count * e.dist.unit) + " (written with other blocks)");
    if (s.ok()) shared_records.push_back(*it);
  }
  for (size_t i = 0; s.ok() && i < keys.size(); ++i) {
    bool found = false;
    for (const auto& e : entries) found = found || e.key == keys[i];
    if (!found) s = Status::InvalidArgument(what + "'s bytes contain key '" + keys[i] + "' that the program did not add");
  }
  if (!s.ok()) shared_records.clear();
  return s;
}

Status Checkpoint::Impl::CheckType(const storage::FileHeader& h, const std::string& where, detail::Item& item,
                                   const std::string& key, const uint64_t* want_count) {
  if (h.key != key) return Status::Corruption(where + ": holds key '" + h.key + "', expected '" + key + "'");
  detail::TypeDesc t = item.type();
  if (h.type_tag != t.tag || h.elem_size != t.elem_size)
    return Status::InvalidArgument("key '" + key + "' in " + where + " is stored as " +
                                   applevel::TypeName(h.type_tag, h.elem_size) + " but registered as " +
                                   applevel::TypeName(t.tag, t.elem_size));
  if (h.raw_len != (t.tag == detail::kTagBlob ? h.count : h.count * h.elem_size) ||
      (h.elem_size && h.count > std::numeric_limits<uint64_t>::max() / h.elem_size))
    return Status::Corruption(where + ": element count and payload length disagree");
  if (want_count && h.count != *want_count)
    return Status::Corruption(where + ": holds " + std::to_string(h.count) + " elements of key '" + key +
                              "', the manifest's block for it has " + std::to_string(*want_count));
  if (!want_count && !item.resizable() && h.count != item.count())
    return Status::InvalidArgument("key '" + key + "' in " + where + " holds " + std::to_string(h.count) +
                                   " elements but " + std::to_string(item.count()) + " are registered");
  return Status::OK();
}

Status Checkpoint::Impl::ReadShared() {
  Status s;
  for (size_t i = 0; s.ok() && i < entries.size(); ++i) {
    auto& e = entries[i];
    const SharedRecord& r = shared_records[i];
    const storage::FileHeader& h = r.header;
    if (e.item->direct()) {
      s = storage::DecodePayload(r.what, h, r.payload, e.item->dest(h.count));
      continue;
    }
    std::string buf(h.raw_len, '\0');
    s = storage::DecodePayload(r.what, h, r.payload, buf.data());
    if (!s.ok()) break;
    try {
      e.item->load(h.count, buf.data(), buf.size(), r.what);
    } catch (const Error& err) {
      s = Status::InvalidArgument(err.what());
    }
  }
  shared_records.clear();
  shared_buf.reset();
  return s;
}

// Reads version v's files into the registered data, each byte once: direct items (arrays, vectors of
// plain types) straight into user memory, checked as they stream; the others into buffers that are loaded
// only after every file of this rank passed its checks. *clobbered says whether user memory was written.
Status Checkpoint::Impl::ReadLocal(uint64_t v, const storage::Manifest& m, bool* clobbered) {
  if (!shared_records.empty()) {
    *clobbered = true;
    return ReadShared();
  }
  // Every file's header, size and type first: a missing, truncated or foreign file fails the version
  // before any user memory is written; only a payload damaged inside (a checksum mismatch) is found late.
  // A key that another number of ranks (or other blocks) wrote: its parts from the old ranks' files.
  std::vector<std::unique_ptr<storage::DataFileReader>> readers;
  std::vector<std::vector<Part>> parts(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    if (Redistributes(m, e)) {
      Status s = OpenParts(v, m, e, &parts[i]);
      if (!s.ok()) return s;
      readers.emplace_back();
      continue;
    }
    // A replicated key written by another number of ranks: old rank 0's copy.
    const bool other = m.ranks != static_cast<uint32_t>(comm->size());
    std::unique_ptr<storage::DataFileReader> r;
    std::string path = store.DataPath(v, e.key, other ? 0 : comm->rank(), static_cast<int>(m.ranks));
    Status s = storage::DataFileReader::Open(env, path, &r);
    if (s.ok()) s = CheckType(r->header(), r->path(), *e.item, e.key);
    if (!s.ok()) return s;
    readers.push_back(std::move(r));
  }
  struct Staged {
    Entry* e;
    uint64_t count;
    std::string bytes;
    const std::string* path;
  };
  std::vector<Staged> later;
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    if (!readers[i]) {
      *clobbered = true;
      Status s = ReadParts(e, parts[i]);
      if (!s.ok()) return s;
      continue;
    }
    storage::DataFileReader& r = *readers[i];
    const storage::FileHeader& h = r.header();
    Status s;
    if (e.item->direct()) {
      *clobbered = true;
      s = r.ReadPayload(e.item->dest(h.count));
    } else {
      Staged st{&e, h.count, std::string(h.raw_len, '\0'), &r.path()};
      s = r.ReadPayload(st.bytes.data());
      later.push_back(std::move(st));
    }
    if (!s.ok()) return s;
  }
  for (Staged& st : later) {
    *clobbered = true;
    try {
      st.e->item->load(st.count, st.bytes.data(), st.bytes.size(), "key '" + st.e->key + "' in " + *st.path);
    } catch (const Error& err) {
      return Status::InvalidArgument(err.what());
    }
  }
  return Status::OK();
}

// Restart: the newest version complete on every rank (and, for a nested child, belonging to the parent's
// version) that reads intact everywhere, falling back version by version. Each byte is read once: every
// file's header, size and type are checked first, then the payloads stream straight into user memory and
// are checksummed on the way (ReadLocal). A payload damaged inside is found only after its bytes reached
// user memory; the older version's read then overwrites them. If no intact version is left after that,
// the program's own initial data is gone, so that is an error (naming the damage), never a fresh start on
// overwritten data; damage found before any byte was read still means a fresh start, as it always did.
bool Checkpoint::Impl::RestartIfNeeded(int64_t* it) {
  RequireCommitted("restart_if_needed()");
  if (touched || !opts.read_on_restart) return false;
  const bool nested = parent != nullptr;
  const uint64_t want_parent = nested ? parent->version : 0;
  std::vector<uint64_t> complete;
  Status ls = store.ListComplete(&complete);
  if (!ls.ok()) std::fprintf(stderr, "revive: %s: %s\n", Where().c_str(), ls.ToString().c_str());
  // Local candidates, newest first (ListComplete's order).
  std::vector<uint64_t> cands;
  for (uint64_t c : complete) {
    storage::Manifest cm;
    if (nested && store.ReadManifest(c, &cm).ok() && cm.parent_version != want_parent) continue;
    cands.push_back(c);
  }

  uint64_t bound = std::numeric_limits<uint64_t>::max();
  storage::Manifest m;
  uint64_t v = 0;
  bool clobbered = false;  // user memory holds bytes of a version that turned out damaged
  std::string last_damage;
  // Multi-level: the versions some node holds pieces of (the same list on every rank). A version is taken
  // from the local levels when it is at least as new as the newest global one, and from the global level
  // when the local levels cannot reconstruct it.
  std::vector<uint64_t> local_versions;
  if (ml) {
    ml->Scan();
    local_versions = ml->Versions();
  }
  bool from_local = false;
  for (;;) {
    uint64_t local = 0;
    for (uint64_t c : cands)
      if (c <= bound) {
        local = c;
        break;
      }
    v = comm->allreduce_min_u64(local);
    uint64_t vl = 0;
    for (uint64_t c : local_versions)
      if (c <= bound) {
        vl = c;
        break;
      }
    if (vl && vl >= v) {
      std::string why;
      if (RestoreMulti(vl, nested ? want_parent : ~uint64_t{0}, &clobbered, &why, &m)) {
        v = vl;
        from_local = true;
        break;
      }
      last_damage = why;
      if (comm->rank() == 0)
        std::fprintf(stderr, "revive: %s: cannot restore from node-local storage: %s; %s\n", Where().c_str(),
                     why.c_str(), vl == v ? ("trying " + store.dir() + " (global level)").c_str()
                                          : "falling back to an older version");
      if (vl != v) {
        bound = vl - 1;
        continue;
      }
    }
    if (v == 0) {
      if (clobbered)
        throw Error(Where() + ": no intact version left to restart from, and reading the damaged one (" +
                    last_damage + ") already overwrote the registered data; remove " + store.dir() +
                    " to start from scratch");
      return false;
    }
    // The manifests first (collectively); a shared-file version is read into a buffer by VerifyShared.
    Status s = VerifyVersion(v, &m);
    if (comm->allreduce_and(s.ok())) {
      s = ReadLocal(v, m, &clobbered);
      if (comm->allreduce_and(s.ok())) break;
    }
    if (!comm->allreduce_and(!s.IsInvalidArgument()))
      throw Error(Where() + ": cannot restart from version " + std::to_string(v) + ": " +
                  (s.IsInvalidArgument() ? s.message() : "another rank found a mismatch with the program"));
    last_damage = "version " + std::to_string(v) + ": " + (s.ok() ? "damaged on another rank" : s.ToString());
    if (comm->rank() == 0 || !s.ok())
      std::fprintf(stderr, "revive: %s: version %llu is unusable (%s); falling back to an older version\n",
                   Where().c_str(), static_cast<unsigned long long>(v),
                   s.ok() ? "damaged on another rank" : s.ToString().c_str());
    bound = v - 1;
  }
  version = v;
  iteration = m.iteration;
  last_iteration = m.iteration;
  touched = true;
  Recorded();
  if (ml && !from_local && comm->rank() == 0)
    std::fprintf(stderr, "revive: %s: restarting from version %llu (iteration %lld) from %s (global level)\n",
                 Where().c_str(), static_cast<unsigned long long>(v), static_cast<long long>(iteration),
                 store.dir().c_str());
  else if (opts.verbose && comm->rank() == 0 && !from_local)
    std::fprintf(stderr, "revive: %s: restarted from version %llu (iteration %lld)\n", Where().c_str(),
                 static_cast<unsigned long long>(v), static_cast<long long>(iteration));
  if (it) *it = m.iteration + 1;
  return true;
}
// ---- multi-level storage (docs/storage-levels.md) ------------------------------------------------------

// The version goes to node-local storage (and partner copies / group parity) collectively, on this
// thread: those writes run at memory and network speed. If the policy also wants it on the global level,
// the same bytes are written there by a background thread and published at a later write() (or at the
// destructor) once every rank's files are durable, so the file system's bandwidth is never waited for.
void Checkpoint::Impl::WriteMulti(std::unique_ptr<Job> job, unsigned levels) {
  const int level = opts.compress ? opts.compress_level : 0;
  const std::string v = std::to_string(job->version);
  // The records as spans (user memory or the job's buffers, no copy) and their checksum in one pass.
  std::vector<std::unique_ptr<storage::EncodedRecord>> encoded;
  std::vector<storage::Span> spans;
  Checksum64Stream sum;
  uint64_t length = 0;
  std::vector<std::pair<size_t, size_t>> records;
  applevel::VersionInfo info;
  info.name = name;
  info.version = job->version;
  info.iteration = job->iteration;
  info.parent_version = job->parent_version;
  info.layouts = MakeLayouts();
  Status s;
  for (auto& f : job->files) {
    auto r = std::make_unique<storage::EncodedRecord>();
    s = storage::EncodeDataRecord(Where() + " version " + v + " key '" + f->key + "'", f->header, f->spans, level,
                                  r.get(), &sum);
    if (!s.ok()) break;
    records.push_back({length, r->size});
    length += r->size;
    spans.insert(spans.end(), r->spans.begin(), r->spans.end());
    encoded.push_back(std::move(r));
    info.keys.push_back(f->key);
  }
  if (!comm->allreduce_and(s.ok()))
    throw Error(Where() + ": encoding version " + v + " failed: " + (s.ok() ? "on another rank" : s.ToString()));
  applevel::Bytes bytes;
  s = ml->Write(info, spans, length, sum.Digest(), levels, &bytes);
  if (!s.ok())
    throw Error(Where() + ": writing version " + v + " to node-local storage (" + applevel::LevelPolicy::Names(levels) +
                ") failed: " + s.ToString() + (version ? "; version " + std::to_string(version) + " is still the newest" : ""));
  version = job->version;
  iteration = job->iteration;
  touched = true;
  Recorded();
  if (opts.async && !opts.zero_copy) {
    spare.clear();
    for (auto& f : job->files) spare.push_back(std::move(f->scratch));
  }
  if (levels & applevel::kL4) {
    if (ml->flush_pending()) PollFlush(true);  // one flush at a time: the previous one must be published first
    Status b;
    if (comm->rank() == 0) b = store.BeginVersion(job->version);
    if (comm->allreduce_and(b.ok())) {
      std::vector<std::string> paths;
      for (auto& f : job->files) paths.push_back(store.DataPath(job->version, f->key, comm->rank(), comm->size()));
      storage::Manifest m = MakeManifest(*job);
      m.shared_file.clear();  // flushed as one file per key and rank, whatever Options::mpiio says
      m.ranges.clear();
      const int keep = opts.keep;
      storage::VersionStore* st = &store;
      ml->StartFlush(info, bytes, std::move(records), std::move(paths), store.VersionDir(job->version),
                     [st, m, keep] {
                       Status ps = st->Publish(m);
                       if (ps.ok()) ps = st->Prune(keep);
                       return ps;
                     });
    } else if (comm->rank() == 0) {
      std::fprintf(stderr, "revive: %s: version %s not flushed to %s: %s\n", Where().c_str(), v.c_str(),
                   store.dir().c_str(), b.ToString().c_str());
    }
  }
  if (opts.verbose && comm->rank() == 0)
    std::fprintf(stderr, "revive: %s: wrote version %s (iteration %lld) to %s\n", Where().c_str(), v.c_str(),
                 static_cast<long long>(iteration), applevel::LevelPolicy::Names(levels).c_str());
  InvalidateChildren();
}

// ---- time-based interval and heartbeat (docs/applevel.md, "Checkpoint interval", "Heartbeat") ----------

void Checkpoint::Impl::Recorded() {
  if (heartbeat) heartbeat->Record(version, iteration);
}

void Checkpoint::Impl::WriteNow(int64_t it, bool update) {
  if (heartbeat) heartbeat->Beat();
  if (!sched.enabled()) {
    if (update) Update();
    Write(it);
    return;
  }
  uint64_t t0 = applevel::MonotonicNs();
  sched.Start(it, t0);  // a write() before any update_and_write: the reference is here
  // C is the checkpoint's cost, not the time a fast rank waits in the write's first collective for slower
  // ones (measured: ranks at 1 and 3 ms per iteration made C 0.10 s instead of 0.02 s every 0.15 s). That
  // wait happens at the program's own next collective anyway; here it counts as computation time, which
  // the maximum over ranks takes from the slowest rank in any case.
  if (comm->size() > 1) {
    comm->barrier();
    t0 = applevel::MonotonicNs();
  }
  if (update) Update();
  Write(it);
  const uint64_t t1 = applevel::MonotonicNs();
  sched.Blocked(t1 - t0);
  // The write was collective, so every rank is here for the same iteration: agree on the slowest rank's
  // rate and the largest cost, and every rank computes the same next iteration from them. No collective
  // is needed between writes.
  const applevel::IntervalSchedule::Sample mine = sched.Measure(it, t1);
  applevel::IntervalSchedule::Sample agreed;
  agreed.ns_per_iteration = comm->allreduce_max_u64(mine.ns_per_iteration);
  agreed.cost_ns = comm->allreduce_max_u64(mine.cost_ns);
  sched.Plan(it, agreed, applevel::MonotonicNs());
  if (opts.verbose && comm->rank() == 0) LogInterval(it, agreed);
}

void Checkpoint::Impl::LogInterval(int64_t it, const applevel::IntervalSchedule::Sample& agreed) const {
  const Checkpoint::IntervalState& st = sched.state();
  char how[160];
  if (sched.automatic())
    std::snprintf(how, sizeof how, "Daly's interval for C = %.4f s, M = REVIVE_MTBF = %.6g s", st.cost, sched.mtbf());
  else
    std::snprintf(how, sizeof how, "REVIVE_CP_INTERVAL; checkpoint cost C = %.4f s", st.cost);
  if (agreed.ns_per_iteration == 0 && st.next_iteration < 0) {
    std::fprintf(stderr, "revive: %s: interval %.4f s (%s); no iteration measured yet, writing every `every` "
                 "iterations until one is\n", Where().c_str(), st.interval, how);
    return;
  }
  std::fprintf(stderr, "revive: %s: interval %.4f s (%s); %.6f s per iteration (slowest rank) -> next write at "
               "iteration %lld (%lld after %lld)\n", Where().c_str(), st.interval, how, st.seconds_per_iteration,
               static_cast<long long>(st.next_iteration), static_cast<long long>(st.next_iteration - it),
               static_cast<long long>(it));
}

void Checkpoint::Impl::TimedUpdate() {
  if (heartbeat) heartbeat->Beat();
  if (!sched.enabled()) return Update();
  const uint64_t t0 = applevel::MonotonicNs();
  Update();
  sched.Blocked(applevel::MonotonicNs() - t0);
}

void Checkpoint::Impl::TimedWait() {
  if (!sched.enabled()) return Wait();
  const uint64_t t0 = applevel::MonotonicNs();
  Wait();
  sched.Blocked(applevel::MonotonicNs() - t0);
}

void Checkpoint::Impl::PollFlush(bool wait) {
  if (!ml || !ml->flush_pending()) return;
  Status s;
  applevel::VersionInfo info;
  if (!ml->FinishFlush(wait, &s, &info)) return;
  // A failed flush loses nothing: the version is complete at the local levels, and the global level keeps
  // its older versions. Say so, and go on.
  if (!s.ok())
    std::fprintf(stderr, "revive: %s: flushing version %llu to %s failed on rank %d: %s\n", Where().c_str(),
                 static_cast<unsigned long long>(info.version), store.dir().c_str(), comm->rank(),
                 s.ToString().c_str());
  else if (opts.verbose && comm->rank() == 0)
    std::fprintf(stderr, "revive: %s: version %llu flushed to %s\n", Where().c_str(),
                 static_cast<unsigned long long>(info.version), store.dir().c_str());
}

bool Checkpoint::Impl::RestoreMulti(uint64_t v, uint64_t want_parent, bool* clobbered, std::string* why,
                                    storage::Manifest* m) {
  applevel::Bytes bytes;
  storage::VersionPlan plan;
  if (!ml->Restore(v, want_parent, &bytes, &plan, why)) {
    // Like the global level's manifest check: another number of ranks is an error, not a fallback.
    if (plan.rank_mismatch) {
      // Node-local pieces are one rank's bytes each; redistributing them is not implemented, so another
      // number of ranks reads the global level's per-rank files (where CheckLayouts decides).
      bool redistributable = true;
      for (const auto& e : entries) redistributable = redistributable && e.layout != Layout::kPrivate;
      if (!redistributable) throw Error(Where() + ": cannot restart from " + *why);
      *why += " (another number of ranks restarts from the global level only)";
    }
    return false;
  }
  const std::string where = ml->local_dir() + "/v-" + std::to_string(v) + ": rank " + std::to_string(comm->rank());
  Status s;
  // Same rank count, other blocks: node-local pieces are one rank's bytes each and are not redistributed,
  // so the global level (whose manifest has the blocks) serves; a fallback, not an error.
  for (const auto& e : entries) {
    const storage::Distribution* d = plan.layouts.Find(e.key);
    if (s.ok() && e.layout == Layout::kDistributed && d && d->blocks[static_cast<size_t>(comm->rank())] != e.block)
      s = Status::Corruption(where + ": key '" + e.key + "' was written with other blocks (redistributed from the "
                             "global level only)");
  }
  if (s.ok()) s = ParseRecords(where, bytes.data, bytes.size, plan.keys);
  if (!comm->allreduce_and(!s.IsInvalidArgument()))
    throw Error(Where() + ": cannot restart from version " + std::to_string(v) + ": " +
                (s.IsInvalidArgument() ? s.message() : "another rank found a mismatch with the program"));
  if (comm->allreduce_and(s.ok())) {
    *clobbered = true;
    s = ReadShared();  // from `bytes`, alive until the end of this function
    if (comm->allreduce_and(s.ok())) {
      m->version = v;
      m->iteration = plan.iteration;
      m->parent_version = plan.parent_version;
      ml->Restored(v);
      if (comm->rank() == 0)
        std::fprintf(stderr, "revive: %s: restarting from version %llu (iteration %lld) from node-local storage, %s\n",
                     Where().c_str(), static_cast<unsigned long long>(v), static_cast<long long>(plan.iteration),
                     plan.Summary().c_str());
      return true;
    }
  }
  shared_records.clear();  // they point into `bytes`
  *why = "version " + std::to_string(v) + ": " + (s.ok() ? "damaged on another rank" : s.ToString());
  return false;
}
// ---- public wrappers ----------------------------------------------------------------------------------

Checkpoint::Checkpoint(std::string name) : Checkpoint(std::move(name), nullptr, Options::from_env()) {}
Checkpoint::Checkpoint(std::string name, Options opts) : Checkpoint(std::move(name), nullptr, std::move(opts)) {}
Checkpoint::Checkpoint(std::string name, std::shared_ptr<detail::Comm> comm)
    : Checkpoint(std::move(name), std::move(comm), Options::from_env()) {}
Checkpoint::Checkpoint(std::string name, std::shared_ptr<detail::Comm> comm, Options opts)
    : impl_(std::make_unique<Impl>(std::move(name), std::move(comm), std::move(opts))) {}

Checkpoint::~Checkpoint() {
  try {
    impl_->Drain();
    impl_->PollFlush(true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "revive: %s\n", e.what());
  }
  if (impl_->parent) {
    auto& sib = impl_->parent->children;
    sib.erase(std::remove(sib.begin(), sib.end(), impl_.get()), sib.end());
  }
  for (Impl* c : impl_->children) c->parent = nullptr;
}

void Checkpoint::add(const std::string& key, std::string& s) {
  add_item(key, std::make_shared<detail::StringItem>(&s));
}
void Checkpoint::add(const std::string& key, Checkpointable& obj) {
  // Not owned: the caller keeps obj alive (documented).
  add_item(key, std::make_shared<detail::CheckpointableItem>(std::shared_ptr<Checkpointable>(&obj, [](Checkpointable*) {})));
}
void Checkpoint::add(const std::string& key, std::shared_ptr<Checkpointable> obj) {
  if (!obj) throw Error(impl_->Where() + ": key '" + key + "': null object");
  add_item(key, std::make_shared<detail::CheckpointableItem>(std::move(obj)));
}
void Checkpoint::add_item(const std::string& key, std::shared_ptr<detail::Item> item) {
  impl_->Add(key, std::move(item));
}
void Checkpoint::distribute(const std::string& key, uint64_t local_n, uint64_t offset, uint64_t global_n,
                            uint64_t unit) {
  impl_->SetLayout(key, Impl::Layout::kDistributed, {offset, local_n}, global_n, unit);
}
void Checkpoint::replicate(const std::string& key) { impl_->SetLayout(key, Impl::Layout::kReplicated, {}, 0, 0); }
void Checkpoint::check_columns(const std::string& key, size_t cols, const std::vector<size_t>& columns) {
  for (size_t c : columns)
    if (c >= cols)
      throw Error("add('" + key + "'): column " + std::to_string(c) + " out of range (" + std::to_string(cols) +
                  " columns)");
}

void Checkpoint::add_child(Checkpoint& child) {
  Impl* c = child.impl_.get();
  if (c == impl_.get()) throw Error(impl_->Where() + ": add_child(itself)");
  if (c->parent) throw Error(c->Where() + ": already has a parent checkpoint");
  for (Impl* p = impl_.get(); p; p = p->parent)
    if (p == c) throw Error(c->Where() + ": add_child would make a cycle");
  c->parent = impl_.get();
  impl_->children.push_back(c);
}

void Checkpoint::commit() { impl_->Commit(); }

bool Checkpoint::restart_if_needed(int64_t* iteration) { return impl_->RestartIfNeeded(iteration); }
bool Checkpoint::restart_if_needed(int* iteration) {
  int64_t it = iteration ? *iteration : 0;
  bool r = impl_->RestartIfNeeded(&it);
  if (r && iteration) {
    if (it > std::numeric_limits<int>::max()) throw Error(impl_->Where() + ": iteration does not fit in int");
    *iteration = static_cast<int>(it);
  }
  return r;
}

bool Checkpoint::update_and_write(int64_t iteration, int64_t every) {
  impl_->RequireCommitted("update_and_write()");
  impl_->last_iteration = iteration;
  if (!impl_->Due(iteration, every)) return false;
  impl_->WriteNow(iteration, true);
  return true;
}

void Checkpoint::write(int64_t iteration) {
  impl_->last_iteration = iteration;
  impl_->WriteNow(iteration, false);
}
void Checkpoint::write() { impl_->WriteNow(impl_->last_iteration, false); }
void Checkpoint::update() { impl_->TimedUpdate(); }
void Checkpoint::wait() { impl_->TimedWait(); }
Checkpoint::IntervalState Checkpoint::interval_state() const { return impl_->sched.state(); }
uint64_t Checkpoint::version() const { return impl_->version; }
int64_t Checkpoint::iteration() const { return impl_->iteration; }
const std::string& Checkpoint::name() const { return impl_->name; }
const Options& Checkpoint::options() const { return impl_->opts; }
std::string Checkpoint::directory() const { return impl_->store.dir(); }

}  // namespace revive
