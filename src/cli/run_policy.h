// `revive run`'s decisions that do not touch processes: the checkpoint interval (fixed or Daly's from the
// measured cost and the MTBF), which generation to restart from, and when to give up. Kept apart from the
// process handling (cmd_run.cpp) so each rule is unit tested (tests/cli/run_policy_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace revive::cli {

// --interval S|auto and --mtbf S.
struct IntervalPolicy {
  bool automatic = false;  // "auto": Daly's interval
  double fixed = 0;        // seconds; 0 = no checkpoints taken by the supervisor
  double mtbf_prior = 0;   // --mtbf (seconds), the MTBF assumed until failures are observed
};

// "auto" or a non-negative number of seconds; errors name the option and the value.
Status ParseInterval(const std::string& text, double mtbf, IntervalPolicy* p);

// The MTBF to use after `failures` failures in `elapsed` seconds of running: the prior counts as one
// failure-free period, so the estimate starts at the prior and tends to the observed elapsed/failures.
double EstimatedMtbf(double prior, double elapsed, unsigned failures);

// Seconds until the next checkpoint. For auto: Daly's interval (core/resilience.h) from the checkpoint
// cost `cost` (the last measured one; before any, 1 s) and EstimatedMtbf. 0 = none.
double NextInterval(const IntervalPolicy& p, double cost, double elapsed, unsigned failures);

// Which generation to restart from. A generation from which `max_tries` relaunches in a row failed
// without producing a newer generation is passed over (its images may be damaged, or the failure it
// holds repeats); 0 = none left (start the job afresh only if no generation was ever usable).
class RestartChoice {
 public:
  explicit RestartChoice(unsigned max_tries) : max_tries_(max_tries) {}
  // Newest of `complete` (newest first) not passed over; 0 if none.
  uint64_t Pick(const std::vector<uint64_t>& complete) const;
  // A relaunch from `gen` (0 = fresh launch) failed.
  void Failed(uint64_t gen) { fails_[gen]++; }
  unsigned FailuresFrom(uint64_t gen) const;

 private:
  unsigned max_tries_;
  std::map<uint64_t, unsigned> fails_;
};

}  // namespace revive::cli
