// RankWatch: the survivors of an RMA job learn that a rank died, say whether the in-memory state could
// have rebuilt it, and end instead of hanging (issue 11; docs/rma.md "When a rank dies").
//
// Neither Open MPI 4.1 nor MPICH 4.0 reports a dead peer to an unmodified program: the survivors wait in
// PMPI_Win_fence (or any blocking call) for good. A thread of this library watches revive's failure mesh
// (src/mpi/failure_mesh.h: one TCP connection per pair of ranks, end-of-file when a process dies), so the
// death is seen whatever MPI call the program is blocked in. The thread makes no MPI call (the program may
// have asked for MPI_THREAD_SINGLE): the survivors agree on the dead set and swap their reports over the
// mesh's sockets, the lowest survivor prints one line, and every survivor leaves with kRankLostExit.
#pragma once

#include <mpi.h>
#include <time.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rma/ckpt_buffers.h"

namespace revive::mpi {
class FailureMesh;
}

namespace revive::rma {

// The exit status of every survivor after a rank's death (docs/rma.md): distinct from a program's usual
// 1 and from revive run's own (70, 75).
constexpr int kRankLostExit = 79;

// Seconds on clock `c` (CLOCK_MONOTONIC, CLOCK_REALTIME).
double Clock(clockid_t c);

// The checkpointed windows as the watcher sees them: slots in chunks of 8, a chunk chained on when the
// slots are full, so no program has too many windows for the rebuild. Only the program's thread adds or
// empties slots; the watcher reads them at any moment, hence the atomics, and a chunk is freed only with
// the whole chain. A window takes the first empty slot: windows are made and freed collectively, in the
// same order at every rank, so every survivor walks them in the same order (the rebuild relies on it).
class WinSlots {
 public:
  WinSlots() = default;
  WinSlots(const WinSlots&) = delete;
  WinSlots& operator=(const WinSlots&) = delete;
  ~WinSlots() { delete next_.load(); }
  void Add(WinCkpt* w);
  void Remove(WinCkpt* w);
  // The windows now registered, in slot order.
  std::vector<WinCkpt*> List() const;

 private:
  static constexpr int kSlots = 8;
  std::atomic<WinCkpt*> slot_[kSlots] = {};
  std::atomic<WinSlots*> next_{nullptr};
};

// What the program's thread publishes for the watcher (atomics: the watcher reads while it runs).
struct WatchState {
  explicit WatchState(int size) : put_gaps(new std::atomic<uint8_t>[static_cast<size_t>(size)]) {
    for (int i = 0; i < size; ++i) put_gaps[i].store(0, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> epoch{0};           // coordinated in-memory checkpoints completed
  std::atomic<bool> in_checkpoint{false};
  std::atomic<bool> unprotected{false};     // a window on a sub-communicator exists
  std::atomic<double> epoch_time{0};        // CLOCK_MONOTONIC of the last checkpoint's end
  std::unique_ptr<std::atomic<uint8_t>[]> put_gaps;  // LogGap bits of my puts, by target world rank
  const volatile uint8_t* n_flags = nullptr;     // my log window's N_me[p]: p's gets from me not logged yet
  const volatile uint8_t* lost_flags = nullptr;  // 1: p's get records did not fit its slice at me
  // The checkpointed windows, for the rebuild (rank_rebuild.h), however many the program has.
  WinSlots wins;
  void Publish(WinCkpt* w) { wins.Add(w); }
  // Before the window's buffers are freed (MPI_Win_free). A death seen at that very moment could still
  // read them: accepted (the program's thread frees a window in a collective call, the watcher acts only
  // after a death).
  void Retire(WinCkpt* w) { wins.Remove(w); }
};

class RankWatch {
 public:
  // Collective over `comm` (every rank alive): opens the mesh and starts the thread. nullptr and *err set
  // when the mesh cannot be made (the job then runs unwatched).
  static RankWatch* Start(MPI_Comm comm, std::vector<std::vector<int>> groups, WatchState* st, std::string* err);
  ~RankWatch();
  // Stops and joins the thread (at most ~0.1 s). The mesh stays open until the destructor: close it only
  // once every rank has stopped watching (a barrier), or the others see this rank "die".
  void Stop();

 private:
  RankWatch() = default;
  void Run();
  [[noreturn]] void Report();

  std::unique_ptr<revive::mpi::FailureMesh> mesh_;
  std::vector<std::vector<int>> groups_;
  WatchState* st_ = nullptr;
  int rank_ = 0, size_ = 1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace revive::rma
