// <revive/checkpoint.hpp> — application-level checkpoint/restart (the CRAFT API).
//
//   revive::Checkpoint cp{"solver"};
//   cp.add("x", x.data(), x.size());
//   cp.add("it", &it);
//   cp.commit();
//   cp.restart_if_needed(&it);                 // it = iteration of the version read + 1
//   for (; it < n; ++it) { step(); cp.update_and_write(it, 10); }
//
// Files live in <REVIVE_CP_PATH>/<name>/v-<N>/<key>[.<rank>] with a MANIFEST per version; a version is
// visible only once complete and durable. Errors are reported by throwing revive::Error.
// See docs/applevel.md for every option and environment variable.
#ifndef REVIVE_CHECKPOINT_HPP_
#define REVIVE_CHECKPOINT_HPP_

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "revive/detail/comm.hpp"

namespace revive {

// Every failure of the library: the message names the checkpoint, key or file and the reason.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Programmatic equivalents of every environment variable. Options::from_env() starts from the defaults
// below and applies the REVIVE_* variables that are set; Checkpoint(name) uses from_env().
struct Options {
  std::string base_path = "./revive-checkpoints";  // REVIVE_CP_PATH
  bool read_on_restart = true;                     // REVIVE_READ_ON_RESTART (0 = always start fresh)
  bool async = false;                              // REVIVE_WRITE_ASYNC (background writer thread)
  bool zero_copy = false;                          // REVIVE_WRITE_ASYNC_ZERO_COPY (implies async)
  int async_thread_cpu = -1;                       // REVIVE_ASYNC_THREAD_CPU (-1 = not pinned)
  int keep = 2;                                    // REVIVE_KEEP (complete versions kept, >= 1)
  bool compress = false;                           // REVIVE_COMPRESS (zstd)
  int compress_level = 3;                          // REVIVE_COMPRESS_LEVEL
  bool verbose = false;                            // REVIVE_VERBOSE (progress on stderr)
  // REVIVE_MPIIO: the MPI flavour writes one shared file per version (MPI-IO) instead of one file per key
  // and rank. With async writing it needs MPI_THREAD_MULTIPLE. No effect on a serial checkpoint.
  bool mpiio = false;

  // Time-based writes (docs/applevel.md, "Checkpoint interval"). interval > 0: update_and_write(it, every)
  // writes every `interval` seconds of computation instead of every `every` iterations (`every` still
  // decides until the first measured write). interval_auto: the interval is Daly's optimum for the measured
  // checkpoint cost and `mtbf` (required then). 0 / false: `every` alone decides, as without these fields.
  double interval = 0;         // REVIVE_CP_INTERVAL=SECONDS (or =auto, which sets interval_auto)
  bool interval_auto = false;  // REVIVE_CP_INTERVAL=auto
  double mtbf = 0;             // REVIVE_MTBF: mean time between failures of the job, seconds
  // Progress heartbeat for a supervisor (revive run): every rank touches <dir>/rank.<R> (mtime) at most once
  // per second from update_and_write/write/update. Empty: none.
  std::string heartbeat_dir;   // REVIVE_HEARTBEAT_DIR

  // Multi-level storage (docs/storage-levels.md). Empty: every version goes to base_path only, as above.
  // Otherwise rules "LEVELS[@N]" separated by commas, e.g. "L1+L3,L4@10": every version to node-local storage
  // protected by erasure-coded groups, every 10th (version number divisible by 10) also flushed to base_path
  // in the background. L1 node-local, L2 a full copy on a partner node, L3 group parity (XOR or Reed-Solomon),
  // L4 base_path (the parallel file system). L2/L3 imply L1. One rule must apply to every version (no @N).
  std::string levels;          // REVIVE_LEVELS
  std::string local_path;      // REVIVE_LOCAL_PATH (default /dev/shm/revive-<uid>): pieces in <local_path>/<host>/
  std::string host;            // REVIVE_HOST (default: this machine's host name)
  // Failure domains above the host, outermost first, '/'-separated (e.g. "rack3"); the host is appended.
  std::string failure_domain;  // REVIVE_FAILURE_DOMAIN
  // How many leading components of the domain path group members (and partners) must not share; 0 = the
  // whole path, i.e. members on different hosts. With "rack3/<host>", 1 = members in different racks.
  int domain_depth = 0;        // REVIVE_DOMAIN_DEPTH
  int group_size = 4;          // REVIVE_GROUP_SIZE: members of an L3 group (capped by the failure domains)
  int parity = 1;              // REVIVE_PARITY: 1 = XOR (one member lost), m >= 2 = Reed-Solomon (m lost)

  // Reads REVIVE_CONFIG (a file of REVIVE_NAME=value lines) if set, then the environment, which wins.
  // Throws Error naming the variable when a value cannot be parsed.
  static Options from_env();
};

class Writer;
class Reader;

// User types, way 1 (like CRAFT's CpBase): derive and add the object.
class Checkpointable {
 public:
  virtual ~Checkpointable() = default;
  // Called by Checkpoint::update() before the data is taken (e.g. to refresh derived state).
  virtual void update() {}
  virtual void write(Writer& w) const = 0;
  virtual void read(Reader& r) = 0;
};

// Byte sink handed to Checkpointable::write.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void write_bytes(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }
  template <class T>
  void write(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "Writer::write needs a trivially copyable type");
    write_bytes(&v, sizeof v);
  }
  void write(const std::string& s) {
    write(static_cast<uint64_t>(s.size()));
    write_bytes(s.data(), s.size());
  }
  template <class T>
  void write(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>, "Writer::write(vector) needs trivially copyable T");
    write(static_cast<uint64_t>(v.size()));
    write_bytes(v.data(), v.size() * sizeof(T));
  }

 private:
  std::string* out_;
};

// Byte source handed to Checkpointable::read; reading past the end throws Error.
class Reader {
 public:
  Reader(const char* p, size_t n, std::string what) : p_(p), n_(n), what_(std::move(what)) {}
  void read_bytes(void* dst, size_t n);
  template <class T>
  void read(T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "Reader::read needs a trivially copyable type");
    read_bytes(&v, sizeof v);
  }
  void read(std::string& s);
  template <class T>
  void read(std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>, "Reader::read(vector) needs trivially copyable T");
    uint64_t n = 0;
    read(n);
    if (n > remaining() / (sizeof(T) ? sizeof(T) : 1)) fail("vector length exceeds the stored data");
    v.resize(n);
    read_bytes(v.data(), n * sizeof(T));
  }
  size_t remaining() const { return n_; }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  const char* p_;
  size_t n_;
  std::string what_;
};

// User types, way 2: a free function found by ADL, one body for both directions:
//   void serialize(revive::Archive& ar, MyType& v) { ar & v.a & v.b; if (ar.loading()) ...; }
class Archive {
 public:
  explicit Archive(Writer* w) : w_(w) {}
  explicit Archive(Reader* r) : r_(r) {}
  bool loading() const { return r_ != nullptr; }
  void bytes(void* p, size_t n) {
    if (r_) r_->read_bytes(p, n);
    else w_->write_bytes(p, n);
  }
  template <class T>
  Archive& operator&(T& v) {
    io(v);
    return *this;
  }

 private:
  template <class T>
  void io(T& v);
  Writer* w_ = nullptr;
  Reader* r_ = nullptr;
};

namespace detail {

template <class T, class = void>
struct has_serialize : std::false_type {};
template <class T>
struct has_serialize<T, std::void_t<decltype(serialize(std::declval<Archive&>(), std::declval<T&>()))>>
    : std::true_type {};

template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type {};

// Type tags stored in every file header so that a key read back as another type is an error.
enum TypeTag : uint32_t {
  kTagPod = 1,  // any other trivially copyable type: element size is checked
  kTagI8, kTagI16, kTagI32, kTagI64, kTagU8, kTagU16, kTagU32, kTagU64,
  kTagF32, kTagF64, kTagF128, kTagC32, kTagC64, kTagC128, kTagBool, kTagChar,
  kTagString = 32,
  kTagBlob = 33,  // serialized user type (Checkpointable or serialize())
};

template <class T>
constexpr uint32_t type_tag() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return kTagBool;
  else if constexpr (std::is_same_v<U, char>) return kTagChar;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>)
    return sizeof(U) == 1 ? kTagI8 : sizeof(U) == 2 ? kTagI16 : sizeof(U) == 4 ? kTagI32 : kTagI64;
  else if constexpr (std::is_integral_v<U>)
    return sizeof(U) == 1 ? kTagU8 : sizeof(U) == 2 ? kTagU16 : sizeof(U) == 4 ? kTagU32 : kTagU64;
  else if constexpr (std::is_same_v<U, float>) return kTagF32;
  else if constexpr (std::is_same_v<U, double>) return kTagF64;
  else if constexpr (std::is_same_v<U, long double>) return kTagF128;
  else if constexpr (std::is_same_v<U, std::complex<float>>) return kTagC32;
  else if constexpr (std::is_same_v<U, std::complex<double>>) return kTagC64;
  else if constexpr (std::is_same_v<U, std::complex<long double>>) return kTagC128;
  else return kTagPod;
}

struct TypeDesc {
  uint32_t tag;
  uint32_t elem_size;
};
struct ByteSpan {
  const void* data;
  size_t size;
};

// One registered piece of data. The templates below adapt each kind of user memory; the library only
// sees this interface.
class Item {
 public:
  virtual ~Item() = default;
  virtual TypeDesc type() const = 0;
  // True when the stored element count may differ from count() (vector, string, user types).
  virtual bool resizable() const { return false; }
  // Elements currently in user memory.
  virtual uint64_t count() const = 0;
  // Calls the user's update hook (Checkpointable); default nothing.
  virtual void update() {}
  // Appends the bytes to write. Spans may point into user memory or into scratch (owned by the caller,
  // kept alive until the write is done).
  virtual void gather(std::vector<ByteSpan>& out, std::string& scratch) = 0;
  // Replaces user memory with `count` stored elements whose bytes are in data[0..size).
  virtual void load(uint64_t count, const char* data, size_t size, const std::string& what) = 0;
  // True when load() can take the bytes straight into user memory (see dest()).
  virtual bool direct() const { return false; }
  // For direct items: resize to `count` and return where its count*elem_size bytes go.
  virtual void* dest(uint64_t /*count*/) { return nullptr; }
};

template <class T>
class PodItem : public Item {
 public:
  PodItem(T* p, size_t n) : p_(p), n_(n) {}
  TypeDesc type() const override { return {type_tag<T>(), sizeof(T)}; }
  uint64_t count() const override { return n_; }
  void gather(std::vector<ByteSpan>& out, std::string&) override { out.push_back({p_, n_ * sizeof(T)}); }
  void load(uint64_t, const char* d, size_t s, const std::string&) override {
    if (s) std::memcpy(p_, d, s);
  }
  bool direct() const override { return true; }
  void* dest(uint64_t) override { return p_; }

 private:
  T* p_;
  size_t n_;
};

template <class T>
class VectorItem : public Item {
 public:
  explicit VectorItem(std::vector<T>* v) : v_(v) {}
  TypeDesc type() const override { return {type_tag<T>(), sizeof(T)}; }
  bool resizable() const override { return true; }
  uint64_t count() const override { return v_->size(); }
  void gather(std::vector<ByteSpan>& out, std::string&) override {
    out.push_back({v_->data(), v_->size() * sizeof(T)});
  }
  void load(uint64_t n, const char* d, size_t s, const std::string&) override {
    v_->resize(n);
    if (s) std::memcpy(v_->data(), d, s);
  }
  bool direct() const override { return true; }
  void* dest(uint64_t n) override {
    v_->resize(n);
    return v_->data();
  }

 private:
  std::vector<T>* v_;
};

class StringItem : public Item {
 public:
  explicit StringItem(std::string* s) : s_(s) {}
  TypeDesc type() const override { return {kTagString, 1}; }
  bool resizable() const override { return true; }
  uint64_t count() const override { return s_->size(); }
  void gather(std::vector<ByteSpan>& out, std::string&) override { out.push_back({s_->data(), s_->size()}); }
  void load(uint64_t, const char* d, size_t s, const std::string&) override { s_->assign(d, s); }
  bool direct() const override { return true; }
  void* dest(uint64_t n) override {
    s_->resize(n);
    return s_->data();
  }

 private:
  std::string* s_;
};

// rows x cols array given as row pointers p[r][c]; optionally only the listed columns of every row.
template <class T>
class Array2DItem : public Item {
 public:
  Array2DItem(T** p, size_t rows, size_t cols, std::vector<size_t> pick)
      : p_(p), rows_(rows), cols_(cols), pick_(std::move(pick)) {}
  TypeDesc type() const override { return {type_tag<T>(), sizeof(T)}; }
  uint64_t count() const override { return rows_ * (pick_.empty() ? cols_ : pick_.size()); }
  void gather(std::vector<ByteSpan>& out, std::string& scratch) override {
    if (pick_.empty()) {
      for (size_t r = 0; r < rows_; ++r) out.push_back({p_[r], cols_ * sizeof(T)});
      return;
    }
    size_t at = scratch.size();
    scratch.resize(at + count() * sizeof(T));
    char* d = scratch.data() + at;
    for (size_t r = 0; r < rows_; ++r)
      for (size_t c : pick_) {
        std::memcpy(d, &p_[r][c], sizeof(T));
        d += sizeof(T);
      }
    out.push_back({scratch.data() + at, count() * sizeof(T)});
  }
  void load(uint64_t, const char* d, size_t, const std::string&) override {
    for (size_t r = 0; r < rows_; ++r) {
      if (pick_.empty()) {
        if (cols_) std::memcpy(p_[r], d, cols_ * sizeof(T));
        d += cols_ * sizeof(T);
      } else {
        for (size_t c : pick_) {
          std::memcpy(&p_[r][c], d, sizeof(T));
          d += sizeof(T);
        }
      }
    }
  }

 private:
  T** p_;
  size_t rows_, cols_;
  std::vector<size_t> pick_;
};

class CheckpointableItem : public Item {
 public:
  explicit CheckpointableItem(std::shared_ptr<Checkpointable> o) : o_(std::move(o)) {}
  TypeDesc type() const override { return {kTagBlob, 1}; }
  bool resizable() const override { return true; }
  uint64_t count() const override { return 0; }
  void update() override { o_->update(); }
  void gather(std::vector<ByteSpan>& out, std::string& scratch) override;
  void load(uint64_t n, const char* d, size_t s, const std::string& what) override;

 private:
  std::shared_ptr<Checkpointable> o_;
};

// Adapts a type with an ADL serialize(Archive&, T&) to Checkpointable.
template <class T>
class SerializeAdapter : public Checkpointable {
 public:
  explicit SerializeAdapter(T* v) : v_(v) {}
  void write(Writer& w) const override {
    Archive ar(&w);
    ar & *v_;  // Archive dispatches: serialize() via ADL, vectors/strings element-wise
  }
  void read(Reader& r) override {
    Archive ar(&r);
    ar & *v_;
  }

 private:
  T* v_;
};

}  // namespace detail

template <class T>
void Archive::io(T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (r_) r_->read(v);
    else w_->write(v);
  } else if constexpr (detail::is_vector<T>::value) {
    uint64_t n = v.size();
    bytes(&n, sizeof n);
    if (r_) {
      if constexpr (std::is_trivially_copyable_v<typename T::value_type>) {
        if (n > r_->remaining() / sizeof(typename T::value_type)) r_->fail("vector length exceeds the stored data");
      }
      v.resize(n);
    }
    if constexpr (std::is_trivially_copyable_v<typename T::value_type>) {
      bytes(v.data(), n * sizeof(typename T::value_type));
    } else {
      for (auto& e : v) io(e);
    }
  } else if constexpr (detail::has_serialize<T>::value) {
    serialize(*this, v);
  } else {
    static_assert(std::is_trivially_copyable_v<T>,
                  "Archive: type is neither trivially copyable nor has serialize(Archive&, T&)");
    bytes(&v, sizeof v);
  }
}

class Checkpoint {
 public:
  // Serial checkpoint with options from the environment (Options::from_env()).
  explicit Checkpoint(std::string name);
  Checkpoint(std::string name, Options opts);
  // Collective flavour: every rank of `comm` constructs the same checkpoint (src/mpi builds on this).
  Checkpoint(std::string name, std::shared_ptr<detail::Comm> comm);
  Checkpoint(std::string name, std::shared_ptr<detail::Comm> comm, Options opts);
  // Waits for an outstanding asynchronous write (errors at that point are printed, not thrown).
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  // --- registration (before commit) -----------------------------------------------------------------
  template <class T>
  void add(const std::string& key, T* p) {
    if constexpr (std::is_base_of_v<Checkpointable, T>) {
      add(key, *p);
    } else if constexpr (std::is_same_v<T, std::string>) {
      add(key, *p);
    } else if constexpr (detail::is_vector<T>::value) {
      add(key, *p);
    } else if constexpr (detail::has_serialize<T>::value) {
      add_item(key, std::make_shared<detail::CheckpointableItem>(
                        std::make_shared<detail::SerializeAdapter<T>>(p)));
    } else {
      static_assert(std::is_trivially_copyable_v<T>,
                    "add(key, T*): T must be trivially copyable, Checkpointable, or have serialize()");
      add_item(key, std::make_shared<detail::PodItem<T>>(p, 1));
    }
  }
  template <class T>
  void add(const std::string& key, T* p, size_t n) {
    static_assert(std::is_trivially_copyable_v<T>, "add(key, T*, n): T must be trivially copyable");
    add_item(key, std::make_shared<detail::PodItem<T>>(p, n));
  }
  template <class T>
  void add(const std::string& key, T** p, size_t rows, size_t cols) {
    static_assert(std::is_trivially_copyable_v<T>, "add(key, T**, rows, cols): T must be trivially copyable");
    add_item(key, std::make_shared<detail::Array2DItem<T>>(p, rows, cols, std::vector<size_t>{}));
  }
  // Only the listed columns (indices into p[r][...]) of every row; throws Error if one is >= cols.
  template <class T>
  void add(const std::string& key, T** p, size_t rows, size_t cols, const std::vector<size_t>& columns) {
    static_assert(std::is_trivially_copyable_v<T>, "add(key, T**, ...): T must be trivially copyable");
    check_columns(key, cols, columns);
    add_item(key, std::make_shared<detail::Array2DItem<T>>(p, rows, cols, columns));
  }
  template <class T>
  void add(const std::string& key, std::vector<T>& v) {
    if constexpr (std::is_trivially_copyable_v<T>) {
      add_item(key, std::make_shared<detail::VectorItem<T>>(&v));
    } else {
      add_item(key, std::make_shared<detail::CheckpointableItem>(
                        std::make_shared<detail::SerializeAdapter<std::vector<T>>>(&v)));
    }
  }
  void add(const std::string& key, std::string& s);
  void add(const std::string& key, Checkpointable& obj);  // obj must outlive the Checkpoint

  // --- data spread over the ranks: a restart may then use another number of ranks ------------------------
  // Every key added with add() is private to its rank, and a version can only be read by as many ranks as
  // wrote it. A version whose keys are all distributed or replicated can be read by any number of ranks
  // (docs/applevel.md, "Restart with another number of ranks"): the program computes its decomposition for
  // the ranks it has now, registers it, and restart_if_needed() reads each rank's block from the old files.
  //
  // This rank holds elements [global_offset, global_offset + local_n) of a 1-D array of global_n elements.
  // The ranks' blocks must tile [0, global_n) exactly (commit() checks that, collectively).
  template <class T>
  void add_distributed(const std::string& key, T* local, size_t local_n, uint64_t global_offset, uint64_t global_n) {
    static_assert(std::is_trivially_copyable_v<T>, "add_distributed: T must be trivially copyable");
    add_item(key, std::make_shared<detail::PodItem<T>>(local, local_n));
    distribute(key, local_n, global_offset, global_n, 1);
  }
  // The same held in a vector, which a restart resizes to local_n (writing checks that it has local_n elements).
  template <class T>
  void add_distributed(const std::string& key, std::vector<T>& local, size_t local_n, uint64_t global_offset,
                       uint64_t global_n) {
    static_assert(std::is_trivially_copyable_v<T>, "add_distributed: T must be trivially copyable");
    add_item(key, std::make_shared<detail::VectorItem<T>>(&local));
    distribute(key, local_n, global_offset, global_n, 1);
  }
  // A row-major 2-D array of global_rows x cols elements distributed by rows: this rank holds rows
  // [row_offset, row_offset + local_rows), contiguous at `local` (local_rows * cols elements).
  template <class T>
  void add_distributed_rows(const std::string& key, T* local, size_t local_rows, size_t cols, uint64_t row_offset,
                            uint64_t global_rows) {
    static_assert(std::is_trivially_copyable_v<T>, "add_distributed_rows: T must be trivially copyable");
    add_item(key, std::make_shared<detail::PodItem<T>>(local, local_rows * cols));
    distribute(key, local_rows, row_offset, global_rows, cols);
  }
  // A value that is the same on every rank (iteration counter, parameters): takes what add() takes. A
  // restart with another number of ranks reads old rank 0's copy.
  template <class... A>
  void add_replicated(const std::string& key, A&&... args) {
    add(key, std::forward<A>(args)...);
    replicate(key);
  }
  void add(const std::string& key, std::shared_ptr<Checkpointable> obj);
  // Any other kind of data (e.g. MPI derived datatypes in src/mpi).
  void add_item(const std::string& key, std::shared_ptr<detail::Item> item);

  // Nested checkpoints: once a version of this (parent) checkpoint is complete, every version the child
  // wrote before is invalid for restart (CRAFT's subCP; paper Table I).
  void add_child(Checkpoint& child);

  // Freezes the set of keys; add() afterwards throws.
  void commit();

  // If a complete version exists (and REVIVE_READ_ON_RESTART is not 0), reads the newest one that is
  // intact on every rank, sets *iteration to its iteration + 1 and returns true. Falls back to older
  // versions (saying so on stderr) when the newest is damaged. Returns false without reading when this
  // checkpoint already wrote or read a version in this run.
  bool restart_if_needed(int64_t* iteration = nullptr);
  bool restart_if_needed(int* iteration);
  bool restart_if_needed(std::nullptr_t) { return restart_if_needed(static_cast<int64_t*>(nullptr)); }

  // Writes when iteration % every == 0 (every <= 0: never). With Options::interval / interval_auto, once a
  // write has been measured: when iteration >= interval_state().next_iteration instead. Returns true when a
  // write was started.
  bool update_and_write(int64_t iteration, int64_t every = 1);
  // Takes the data now (in async copy mode: copies it) and writes a version recording `iteration`.
  void write(int64_t iteration);
  void write();  // records the last iteration passed to update_and_write / write, or 0
  // Async copy mode: copies user data into the checkpoint's buffers; otherwise calls user update hooks.
  void update();
  // Waits for the outstanding asynchronous write and publishes it; throws if it failed.
  void wait();

  // Time-based writes (Options::interval / interval_auto): the figures all ranks agreed on at the last
  // write. next_iteration: the iteration from which update_and_write writes again (-1: `every` decides,
  // i.e. no interval set, or no write measured yet).
  struct IntervalState {
    double interval = 0;               // seconds of computation between writes (auto: Daly's value)
    double cost = 0;                   // checkpoint cost C, seconds (max over ranks)
    double seconds_per_iteration = 0;  // max over ranks
    int64_t next_iteration = -1;
  };
  IntervalState interval_state() const;

  // Number of the newest version written or read by this object (0 = none yet).
  uint64_t version() const;
  // Iteration recorded in that version.
  int64_t iteration() const;
  const std::string& name() const;
  const Options& options() const;
  // Directory of this checkpoint (<base_path>/<name>).
  std::string directory() const;

  class Impl;

 private:
  static void check_columns(const std::string& key, size_t cols, const std::vector<size_t>& columns);
  void distribute(const std::string& key, uint64_t local_n, uint64_t offset, uint64_t global_n, uint64_t unit);
  void replicate(const std::string& key);
  std::unique_ptr<Impl> impl_;
};

}  // namespace revive

#endif  // REVIVE_CHECKPOINT_HPP_
