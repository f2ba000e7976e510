// revive::detail::Comm — the only way the checkpoint library talks to its peers.
//
// Every collective decision (which version to restart from, whether a version is complete on every rank,
// rank 0 publishing the manifest after all ranks report success) goes through this interface, so the MPI
// flavour (src/mpi) only has to implement it. The serial implementation is serial_comm().
// All calls are collective: every rank must make the same sequence of calls.
#ifndef REVIVE_DETAIL_COMM_HPP_
#define REVIVE_DETAIL_COMM_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace revive::storage {
class SharedFileIO;  // src/storage/shared_file.h (internal)
}

namespace revive::detail {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  virtual uint64_t allreduce_min_u64(uint64_t v) = 0;
  virtual bool allreduce_and(bool v) = 0;
  // Broadcasts n bytes from root's buf into every rank's buf (n must be equal on all ranks).
  virtual void bcast(void* buf, size_t n, int root) = 0;

  // Collective. The collective file I/O of shared-file mode (Options::mpiio), on its own channel so it
  // may run on the async writer thread; nullptr when this Comm has none (serial: files per key).
  virtual std::shared_ptr<storage::SharedFileIO> open_shared_file_io() { return nullptr; }

  // Multi-level storage (partner copies, erasure-coded groups, rebuilding pieces at restart) moves bytes
  // between ranks. The defaults serve one rank (sends to itself); the MPI flavour overrides both.
  // Collective: every rank's string, in rank order.
  virtual std::vector<std::string> allgather_string(const std::string& s);
  struct SendBuf {
    int peer;
    const void* data;
    size_t size;
  };
  struct RecvBuf {
    int peer;
    void* data;
    size_t size;
  };
  // Not collective: posts every send and receive, then waits for all of them. Messages between one pair of
  // ranks match in the order they are listed; sizes must agree on both sides. A rank may send to itself.
  virtual void exchange(const std::vector<SendBuf>& sends, const std::vector<RecvBuf>& recvs);

  // Helpers built on the primitives above.
  uint64_t allreduce_max_u64(uint64_t v) { return ~allreduce_min_u64(~v); }
  // Broadcasts a string of any length from root (its length goes first).
  void bcast_string(std::string& s, int root) {
    uint64_t n = s.size();
    bcast(&n, sizeof n, root);
    s.resize(n);
    if (n) bcast(s.data(), n, root);
  }
};

// One rank, no peers: collectives return their argument.
std::shared_ptr<Comm> serial_comm();

}  // namespace revive::detail

#endif  // REVIVE_DETAIL_COMM_HPP_
