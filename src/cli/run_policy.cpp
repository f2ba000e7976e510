#include "cli/run_policy.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>

#include "core/resilience.h"

namespace revive::cli {

Status ParseInterval(const std::string& text, double mtbf, IntervalPolicy* p) {
  *p = IntervalPolicy();
  if (!(mtbf >= 0) || !std::isfinite(mtbf))
    return Status::InvalidArgument("--mtbf " + std::to_string(mtbf) + ": not a number of seconds >= 0");
  p->mtbf_prior = mtbf;
  if (text == "auto") {
    if (mtbf <= 0)
      return Status::InvalidArgument(
          "--interval auto needs --mtbf SECONDS: the mean time between failures to assume until failures "
          "are observed (Daly's interval is computed from it and the measured checkpoint cost)");
    p->automatic = true;
    return Status::OK();
  }
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v))
    return Status::InvalidArgument("--interval " + text + ": expected a number of seconds >= 0 or \"auto\"");
  p->fixed = v;
  return Status::OK();
}

double EstimatedMtbf(double prior, double elapsed, unsigned failures) {
  return (prior + std::max(0.0, elapsed)) / (1.0 + failures);
}

double NextInterval(const IntervalPolicy& p, double cost, double elapsed, unsigned failures) {
  if (!p.automatic) return p.fixed;
  // Before a checkpoint was measured, assume one second: the first interval is then short enough that
  // the real cost is known early, and Daly's formula takes over from the second checkpoint on.
  double delta = cost > 0 ? cost : 1.0;
  return resilience::DalyInterval(delta, EstimatedMtbf(p.mtbf_prior, elapsed, failures));
}

uint64_t RestartChoice::Pick(const std::vector<uint64_t>& complete) const {
  for (uint64_t g : complete)
    if (FailuresFrom(g) < max_tries_) return g;
  return 0;
}

unsigned RestartChoice::FailuresFrom(uint64_t gen) const {
  auto it = fails_.find(gen);
  return it == fails_.end() ? 0 : it->second;
}

}  // namespace revive::cli
