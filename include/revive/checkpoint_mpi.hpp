// <revive/checkpoint_mpi.hpp> — the MPI flavour of the application-level library.
//
//   revive::mpi::Checkpoint cp{"solver", MPI_COMM_WORLD};
//   cp.add("x", x.data(), x.size());                       // everything <revive/checkpoint.hpp> offers
//   cp.add("halo", buf, 1, my_derived_type);               // MPI derived datatypes (MPI_Pack/MPI_Unpack)
//   cp.commit();
//   cp.restart_if_needed(&it);
//
// Collective: every rank of the communicator constructs the same checkpoint and makes the same calls.
// Each rank writes its own files (<key>.<rank>); a version becomes visible only after every rank wrote it
// (rank 0 publishes the manifest), and restart reads the newest version that is intact on every rank.
// The library's collectives run on a private duplicate of the communicator. Asynchronous writes need
// MPI_THREAD_MULTIPLE only if the application itself calls MPI from several threads, or in shared-file
// mode (Options::mpiio: one file per version written with MPI-IO, from the writer thread when async).
#ifndef REVIVE_CHECKPOINT_MPI_HPP_
#define REVIVE_CHECKPOINT_MPI_HPP_

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>

#include "revive/checkpoint.hpp"

namespace revive::mpi {

// The detail::Comm over (a duplicate of) `comm`; collective over comm.
std::shared_ptr<detail::Comm> make_mpi_comm(MPI_Comm comm);

// An object of an MPI datatype: `count` elements of `type` at `buf`, packed with MPI_Pack. The datatype
// must stay valid (not freed) as long as the checkpoint uses it.
std::shared_ptr<detail::Item> datatype_item(const std::string& key, void* buf, int count, MPI_Datatype type,
                                            MPI_Comm comm);

class Checkpoint : public revive::Checkpoint {
 public:
  Checkpoint(std::string name, MPI_Comm comm)
      : revive::Checkpoint(std::move(name), make_mpi_comm(comm)), comm_(comm) {}
  Checkpoint(std::string name, MPI_Comm comm, Options opts)
      : revive::Checkpoint(std::move(name), make_mpi_comm(comm), std::move(opts)), comm_(comm) {}

  using revive::Checkpoint::add;
  void add(const std::string& key, void* buf, int count, MPI_Datatype type) {
    add_item(key, datatype_item(name() + "/" + key, buf, count, type, comm_));
  }

 private:
  MPI_Comm comm_;
};

}  // namespace revive::mpi

#endif  // REVIVE_CHECKPOINT_MPI_HPP_
