// The coordinator's record of MPI ranks that died, on disk for `revive run` (docs/run.md).
#pragma once

namespace revive::coord {

// In the checkpoint directory: one line per MPI rank the coordinator saw end without exit() (killed or
// crashed; docs/protocol.md "Dead MPI ranks"). `revive run` clears it before each attempt and reads it
// when the job's launcher exits 0: a launcher may hide a rank's death (Open MPI's mpirun under
// `--mca orte_abort_on_non_zero_status 0`), and the coordinator (--exit-on-last) is gone by then.
inline constexpr const char* kDeadRanksFile = ".revive-dead-ranks";

}  // namespace revive::coord
