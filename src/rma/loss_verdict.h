// What the survivors of an RMA job can say when ranks die (issue 11, docs/rma.md "When a rank dies"):
// whether the in-memory state (the last coordinated checkpoint's XOR parity plus the access logs) could
// rebuild every dead rank, or why not. Pure: the watcher (rank_watch.cc) gathers one report per survivor
// over the failure mesh and hands them here, so the rule is unit-tested without MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace revive::rma {

// Why a survivor's logs about one peer are incomplete since the last checkpoint (bits).
enum LogGap : uint8_t {
  kGapPutLayout = 1,  // the survivor put to that peer with a non-contiguous target type (no layout logged)
  kGapGetLost = 2,    // that peer's get records at the survivor did not fit its slice of the log window
  kGapGetOpen = 4,    // that peer had gets from the survivor issued but not logged yet (N flag set)
};

struct SurvivorReport {
  int rank = -1;
  uint64_t epoch = 0;          // coordinated in-memory checkpoints completed (0: none yet)
  bool in_checkpoint = false;  // inside the next one when the death was seen (parity half written)
  bool unprotected = false;    // has a window on a sub-communicator (never checkpointed)
  std::vector<uint8_t> gaps;   // LogGap bits, by world rank
};

struct LossVerdict {
  bool rebuildable = false;
  uint64_t epoch = 0;
  std::string why;  // "group {0,1,2,3} lost only rank 2; logs since checkpoint 5 complete", or the reason not
};

// dead: sorted world ranks; groups: the checksum groups (placement.h).
LossVerdict JudgeLoss(const std::vector<int>& dead, const std::vector<std::vector<int>>& groups,
                      const std::vector<SurvivorReport>& reports);

// "rank 2" / "ranks 1, 5"
std::string RankList(const std::vector<int>& ranks);

// One window's complete in-memory checkpoints (its two generations, ckpt_buffers.h) at one survivor, as
// reported over the mesh (0: none).
struct WinGens {
  uint32_t id = 0;
  uint64_t ckpt[2] = {0, 0};
};

// The newest checkpoint of window `id` complete at every one of `survivors` (their reports), 0 if none:
// the one a rebuild of their group's dead member uses (rank_rebuild.h).
uint64_t NewestCommon(const std::vector<const std::vector<WinGens>*>& survivors, uint32_t id);

}  // namespace revive::rma
