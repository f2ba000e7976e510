// IntervalSchedule: when update_and_write writes under a time-based interval (Options::interval, or Daly's
// interval with Options::interval_auto). Pure arithmetic on times the caller measures, so every rank takes
// the same decision from the figures they agreed on (docs/applevel.md, "Checkpoint interval").
#ifndef REVIVE_APPLEVEL_INTERVAL_H_
#define REVIVE_APPLEVEL_INTERVAL_H_

#include <cstdint>

#include "revive/checkpoint.hpp"

namespace revive::applevel {

class IntervalSchedule {
 public:
  // interval > 0 (seconds), or automatic with mtbf > 0; neither: disabled (`every` alone decides).
  IntervalSchedule(double interval, bool automatic, double mtbf);

  bool enabled() const { return enabled_; }
  bool started() const { return started_; }
  // Called on every update_and_write, so it is a compare or two. Before the first measured write (and
  // whenever the interval is off) the iteration-count rule; every <= 0 never writes either way.
  bool Due(int64_t iteration, int64_t every) const {
    if (every <= 0) return false;
    if (state_.next_iteration < 0) return iteration % every == 0;
    return iteration >= state_.next_iteration;
  }

  // The first checkpoint call of the run: the start of the first measured stretch of computation.
  void Start(int64_t iteration, uint64_t now_ns);
  // Time the program spent blocked in checkpoint calls (write, update, wait): C, not computation.
  void Blocked(uint64_t ns) { blocked_ns_ += ns; }

  struct Sample {
    uint64_t ns_per_iteration = 0;  // 0: nothing measured (no iteration since the reference)
    uint64_t cost_ns = 0;
  };
  // At the end of a write at `iteration` (its blocked time already counted): this rank's figures since the
  // previous write (computation per iteration; time blocked in checkpoint calls since then).
  Sample Measure(int64_t iteration, uint64_t now_ns) const;
  // With the ranks' maxima: the next write's iteration, k = max(1, round(interval / seconds per iteration))
  // after this one; then the next stretch starts at (iteration, now_ns).
  void Plan(int64_t iteration, Sample agreed, uint64_t now_ns);

  const Checkpoint::IntervalState& state() const { return state_; }
  bool automatic() const { return automatic_; }
  double mtbf() const { return mtbf_; }

 private:
  bool enabled_;
  bool automatic_;
  double fixed_;  // seconds, when not automatic
  double mtbf_;
  bool started_ = false;
  int64_t ref_iteration_ = 0;
  uint64_t ref_ns_ = 0;
  uint64_t blocked_ns_ = 0;
  int64_t last_k_ = 0;  // the gap chosen last (reused when a write measured nothing)
  Checkpoint::IntervalState state_;
};

// CLOCK_MONOTONIC in nanoseconds.
uint64_t MonotonicNs();

}  // namespace revive::applevel

#endif  // REVIVE_APPLEVEL_INTERVAL_H_
