// The rebuild of a dead rank's checkpointed windows by the survivors of its checksum group (issue 11;
// docs/rma.md "When a rank dies"). Runs in the watcher thread after the survivors agreed on the dead set
// and swapped their reports (rank_watch.cc), without MPI: every survivor of the group computes its share
// (xor_code.h RebuildContribution) from the newest checkpoint complete at all of them, sends it over the
// failure mesh to the group's lowest survivor, which XORs the shares and checks the result against the
// XXH3-64 the dead rank recorded with that checkpoint (handed to every member with the parity).
#pragma once

#include <cstdint>
#include <vector>

#include "rma/loss_verdict.h"

namespace revive::mpi {
class FailureMesh;
}

namespace revive::rma {

struct WatchState;

// My windows' complete generations (what I report).
std::vector<WinGens> MyGens(const WatchState& st);

// Collective over the survivors of every checksum group that lost exactly one member (others return at
// once): rebuilds each such dead rank's windows at its group's lowest survivor, which prints one line per
// window (rebuilt and verified, or refused and why). `gens`: every rank's report, empty for the dead.
void RebuildDead(revive::mpi::FailureMesh* mesh, int me, const std::vector<int>& dead,
                 const std::vector<std::vector<int>>& groups, const std::vector<std::vector<WinGens>>& gens,
                 const WatchState& st);

}  // namespace revive::rma
