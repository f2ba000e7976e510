// One Lanczos run with application-level checkpoints: registers the solver state, restarts from the
// newest complete version if there is one, iterates, and prints the lowest eigenvalues with %.17g on
// stdout. Everything that differs between an uninterrupted and a restarted run goes to stderr, so the two
// stdouts must be identical byte for byte.
#ifndef REVIVE_EXAMPLES_LANCZOS_RUN_H_
#define REVIVE_EXAMPLES_LANCZOS_RUN_H_

#include <cstdio>

#include "config.h"
#include "solver.h"

namespace lanczos {

struct RunResult {
  double seconds = 0;       // wall time of the iteration loop (checkpoint writes included)
  double in_checkpoint = 0; // part of it spent inside checkpoint calls (update_and_write, wait)
  double final_wait = 0;    // of which the wait() after the loop (the last version made durable)
  int restarted_from = -1;  // iteration the run resumed after (-1 = fresh start)
};

// Runs to completion with `cp` (already constructed for the right communicator, not yet committed).
// rank 0 prints. Throws revive::Error on checkpoint failures.
RunResult Run(const Config& c, const Lattice& L, const Parallel& P, revive::Checkpoint& cp, bool print);

}  // namespace lanczos

#endif
