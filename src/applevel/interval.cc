// Time-based checkpoint interval: see interval.h and docs/applevel.md ("Checkpoint interval").
#include "applevel/interval.h"

#include <time.h>

#include <algorithm>
#include <cmath>

#include "core/resilience.h"

namespace revive::applevel {

uint64_t MonotonicNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

IntervalSchedule::IntervalSchedule(double interval, bool automatic, double mtbf)
    : enabled_(automatic || interval > 0), automatic_(automatic), fixed_(interval), mtbf_(mtbf) {
  if (!automatic_) state_.interval = fixed_;
}

void IntervalSchedule::Start(int64_t iteration, uint64_t now_ns) {
  if (started_) return;
  started_ = true;
  ref_iteration_ = iteration;
  ref_ns_ = now_ns;
  blocked_ns_ = 0;
}

IntervalSchedule::Sample IntervalSchedule::Measure(int64_t iteration, uint64_t now_ns) const {
  Sample s;
  s.cost_ns = blocked_ns_;
  const int64_t iterations = iteration - ref_iteration_;
  if (iterations <= 0) return s;  // a write at the first call, or the program went back: no rate
  const uint64_t elapsed = now_ns > ref_ns_ ? now_ns - ref_ns_ : 0;
  const uint64_t compute = elapsed > blocked_ns_ ? elapsed - blocked_ns_ : 0;
  // At least 1 ns: 0 means "nothing measured" in the agreement.
  s.ns_per_iteration = std::max<uint64_t>(1, compute / static_cast<uint64_t>(iterations));
  return s;
}

void IntervalSchedule::Plan(int64_t iteration, Sample agreed, uint64_t now_ns) {
  ref_iteration_ = iteration;
  ref_ns_ = now_ns;
  blocked_ns_ = 0;
  if (agreed.cost_ns) state_.cost = static_cast<double>(agreed.cost_ns) * 1e-9;
  if (automatic_) {
    // A write too fast for the clock still costs something: 1 us keeps Daly's formula above 0.
    state_.interval = resilience::DalyInterval(std::max(state_.cost, 1e-6), mtbf_);
  }
  if (agreed.ns_per_iteration == 0) {
    // Nothing measured: keep the last gap, or stay with `every` until a write is measured.
    if (last_k_ > 0) state_.next_iteration = iteration + last_k_;
    return;
  }
  state_.seconds_per_iteration = static_cast<double>(agreed.ns_per_iteration) * 1e-9;
  // Capped so iteration + k cannot overflow (an interval of 1e9 s at 1 ns per iteration is 1e18).
  const double k = std::round(state_.interval / state_.seconds_per_iteration);
  last_k_ = static_cast<int64_t>(std::clamp(k, 1.0, 1e15));
  state_.next_iteration = iteration + last_k_;
}

}  // namespace revive::applevel
