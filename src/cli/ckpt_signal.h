// --checkpoint-signal SIG (revive launch, revive restart): a signal sent to revive while it waits for its
// program asks the coordinator for a checkpoint, the way a batch script's `scancel --signal=USR1` or a
// walltime warning would; it is revive's, never delivered to the program. Other termination signals
// sent to revive are passed on to the program.
#pragma once

#include <functional>

#include <sys/types.h>

#include <string>
#include <vector>

#include "cli/common.h"
#include "core/status.h"

namespace revive::cli {

// "USR1", "SIGUSR1" or a number; "" = none (*sig = 0).
Status ParseCheckpointSignal(const std::string& name, int* sig);
// From now on `sig` (0: none) requests a checkpoint of the computation at t (ServeCheckpointSignal). It
// interrupts blocking waits (no SA_RESTART).
void ArmCheckpointSignal(int sig, const Target& t);
// SIGTERM/INT/HUP/QUIT/USR1/USR2 sent to us (but the checkpoint signal) are passed on to pid.
void ForwardSignalsTo(pid_t pid);
// Call when a wait was interrupted: starts `revive checkpoint` for each signal seen since the last call
// (a child process: the wait goes on meanwhile) and reaps those that ended.
void ServeCheckpointSignal();
// WaitEach (hosts.h) that serves the checkpoint signal while it waits. With FailFast(), the first kid
// that ends abnormally (a signal or a non-zero status) ends the wait: the others are killed (SIGKILL,
// their status 128+9) so that a supervisor learns of the failure at once. `ended` (if given) is called
// with each kid's index and status as it ends, in the order they end, while the others still run.
std::vector<int> WaitEachServing(const std::vector<pid_t>& kids,
                                 const std::function<void(size_t, int)>& ended = nullptr);
// REVIVE_FAIL_FAST=1 (set by `revive run` for the launch/restart it supervises).
bool FailFast();

}  // namespace revive::cli
