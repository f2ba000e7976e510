// <revive/recovery_mpi.hpp> — in-job recovery from a dead rank (CRAFT's "AFT" zone).
//
//   revive::mpi::Recovery rec(MPI_COMM_WORLD, revive::mpi::Recovery::Mode::kReplace, argc, argv);
//   rec.run([&](MPI_Comm comm) {                       // the zone: may run again after a failure
//     revive::mpi::Checkpoint cp{"solver", comm};
//     cp.add("x", x.data(), x.size()); cp.add("it", &it); cp.commit();
//     cp.restart_if_needed(&it);                        // a replacement (and every survivor) re-reads
//     for (; it < n; ++it) {
//       MPI_Request rq[2]; MPI_Irecv(..., comm, &rq[0]); MPI_Isend(..., comm, &rq[1]);
//       rec.wait_all(2, rq);                            // throws PeerFailed when a rank died
//       cp.update_and_write(it, freq);
//     }
//   });
//   rec.finalize_and_exit(0);                          // instead of MPI_Finalize (see there)
//
// Inside the zone every wait for communication goes through rec.wait()/wait_all() (nonblocking MPI calls
// only), and so do the checkpoint's own collectives: a blocking MPI call that involves a dead rank never
// returns with these MPIs. Buffers of nonblocking collectives come from zone_buffer() (see there).
// When a rank dies, every survivor's next wait throws PeerFailed; run() catches it,
// the survivors agree on the dead ranks, build a communicator without them (Mode::kShrink) or spawn
// replacements into the dead ranks' places (Mode::kReplace: same size, same rank order), and run the zone
// again: survivors keep their memory, and restart_if_needed reads the last complete checkpoint, which for a
// replacement holds the dead rank's data. A replacement process enters main() again (MPI_Comm_spawn of the
// same program with the same arguments): it constructs the same Recovery and calls the same run().
//
// Open MPI 4.1 needs `mpirun --enable-recovery --mca btl tcp,self` (survivors are killed otherwise; the
// shared-memory transport cannot reach spawned processes). Failure detection is revive's own TCP mesh
// (src/mpi/failure_mesh.h), unless built with REVIVE_ULFM for an MPI with working ULFM, where it is
// MPIX_ERR_PROC_FAILED + MPIX_Comm_revoke/shrink/agree. See docs/recovery.md for the design and limits.
#ifndef REVIVE_RECOVERY_MPI_HPP_
#define REVIVE_RECOVERY_MPI_HPP_

#include <mpi.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace revive::mpi {

// Thrown out of a wait inside the zone when a rank of the zone's communicator died (or another survivor
// started a recovery because one did).
class PeerFailed : public std::runtime_error {
 public:
  explicit PeerFailed(const std::string& what) : std::runtime_error(what) {}
};

class Recovery {
 public:
  enum class Mode { kShrink, kReplace };

  // Collective over `comm` (all ranks alive) in an original process; in a replacement started by a
  // recovery, joins the survivors instead (then `comm` is ignored). argc/argv are what replacements get.
  // Throws std::runtime_error naming the cause if the failure detector cannot be set up.
  Recovery(MPI_Comm comm, Mode mode, int argc, char** argv);
  ~Recovery();
  Recovery(const Recovery&) = delete;
  Recovery& operator=(const Recovery&) = delete;

  // The zone's communicator now (a new one after each recovery; owned by the Recovery).
  MPI_Comm comm() const;
  // True in a process that was spawned to replace a dead rank.
  bool replacement() const;
  // How many recoveries this job went through.
  int recoveries() const;
  // Seconds the last recovery took (agreement + new communicator + spawn + new detector).
  double last_recovery_seconds() const;

  // Waits for the requests like MPI_Waitall, watching for failures; throws PeerFailed when a rank died.
  // The requests of a failed wait are abandoned (never freed: MPI cannot complete them).
  void wait(MPI_Request* req, MPI_Status* status = MPI_STATUS_IGNORE);
  void wait_all(int n, MPI_Request* reqs, MPI_Status* statuses = MPI_STATUSES_IGNORE);
  // Throws PeerFailed if a failure is already known (for long computations between waits).
  void check();

  // Memory for the buffers of nonblocking collectives inside the zone: freed when the zone body returns,
  // abandoned (never freed, never reused) when it fails. A nonblocking collective that a failure
  // interrupted cannot be cancelled, and Open MPI keeps progressing it: it may still write into its
  // buffers later, so they must not be stack memory or memory used again. Receives of a
  // failed wait are cancelled (MPI_Cancel) and sends only read, so point-to-point buffers need no care.
  template <class T>
  T* zone_buffer(size_t n) {
    return static_cast<T*>(zone_alloc(n * sizeof(T)));
  }

  // Runs body(comm()) until it returns without PeerFailed, recovering in between. Throws
  // std::runtime_error when recovery is impossible (a failure during recovery, a spawn that fails).
  void run(const std::function<void(MPI_Comm)>& body);

  // Ends the process: MPI_Finalize and exit(status) when no recovery happened; after a recovery, a barrier
  // over comm(), stdio flushed, then _exit(status) without MPI_Finalize (atexit handlers and static
  // destructors do not run). Why: Open MPI 4.1's MPI_Finalize sometimes waits forever for the dead
  // process in its exit fence (2 of ~35 recovered jobs here; every survivor in ompi_mpi_finalize).
  [[noreturn]] void finalize_and_exit(int status);

  struct Impl;

 private:
  void* zone_alloc(size_t bytes);
  std::unique_ptr<Impl> impl_;
};

}  // namespace revive::mpi

#endif  // REVIVE_RECOVERY_MPI_HPP_
