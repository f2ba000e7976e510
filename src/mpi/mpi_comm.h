// MPI implementation of revive::detail::Comm: the library's collective decisions (restart version,
// completeness, manifest publication) travel over a private duplicate of the user's communicator, so they
// can never match a message of the application.
#ifndef REVIVE_SRC_MPI_MPI_COMM_H_
#define REVIVE_SRC_MPI_MPI_COMM_H_

#include <mpi.h>

#include <memory>

#include "revive/checkpoint_mpi.hpp"

namespace revive::mpi {

// While a recovery zone runs (recovery.cc), the library's collectives on that thread wait through this
// hook instead of MPI_Waitall: it watches for dead ranks and throws PeerFailed, where a blocking wait would
// never return. Thread-local: other threads (an async writer) are not in the zone.
using WaitHook = void (*)(void* ctx, int n, MPI_Request* reqs);
void SetWaitHook(WaitHook hook, void* ctx);

class MpiComm final : public detail::Comm {
 public:
  // Collective over `comm` (MPI_Comm_dup). MPI must be initialised.
  explicit MpiComm(MPI_Comm comm);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  uint64_t allreduce_min_u64(uint64_t v) override;
  bool allreduce_and(bool v) override;
  void bcast(void* buf, size_t n, int root) override;
  std::vector<std::string> allgather_string(const std::string& s) override;
  void exchange(const std::vector<SendBuf>& sends, const std::vector<RecvBuf>& recvs) override;
  // Shared-file mode over MPI-IO (mpi_shared_file.cc), on its own duplicate of the communicator.
  std::shared_ptr<storage::SharedFileIO> open_shared_file_io() override;

  MPI_Comm comm() const { return comm_; }

 private:
  // Completes a started collective (through the recovery hook when one is set); a failure there leaves
  // the collective in progress inside MPI and sets abandoned_.
  void Wait(int n, MPI_Request* reqs, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool abandoned_ = false;  // a collective on comm_ was interrupted by a failure: never free comm_
  int rank_ = 0, size_ = 1;
};



}  // namespace revive::mpi

#endif  // REVIVE_SRC_MPI_MPI_COMM_H_
