// Resilience arithmetic: see resilience.h for the formulas and their symbols.
#include "core/resilience.h"

#include <algorithm>
#include <cmath>

namespace revive::resilience {

double YoungInterval(double delta, double mtbf) { return std::sqrt(2.0 * delta * mtbf); }

double DalyInterval(double delta, double mtbf) {
  if (delta >= 2.0 * mtbf) return mtbf;
  const double r = delta / (2.0 * mtbf);
  return std::sqrt(2.0 * delta * mtbf) * (1.0 + std::sqrt(r) / 3.0 + r / 9.0) - delta;
}

double PoissonPmf(double lambda, uint64_t x) {
  if (lambda <= 0) return x == 0 ? 1.0 : 0.0;
  const double xd = static_cast<double>(x);
  // In logs: e^{-λ} λ^x / x! under- and overflows separately for large λ or x.
  return std::exp(xd * std::log(lambda) - lambda - std::lgamma(xd + 1.0));
}

Level PoissonLevel(std::string name, uint64_t count, double failures_per_day, double period_days) {
  const double lambda = failures_per_day * period_days;
  Level l;
  l.name = std::move(name);
  l.count = count;
  l.pmf = [lambda](uint64_t x) { return PoissonPmf(lambda, x); };
  l.decreasing_from = static_cast<uint64_t>(std::ceil(std::max(lambda, 0.0))) + 1;
  return l;
}

double BinomialRatio(uint64_t H, uint64_t x, uint64_t k) {
  if (x < k || H < x) return 0.0;
  double r = 1.0;
  for (uint64_t i = 0; i < k; ++i) r *= static_cast<double>(x - i) / static_cast<double>(H - i);
  return r;
}

// C(n, k) in floating point (exact enough for the group sizes in question; inf past ~1e308).
static double Choose(uint64_t n, uint64_t k) {
  if (k > n) return 0.0;
  k = std::min(k, n - k);
  double c = 1.0;
  for (uint64_t i = 1; i <= k; ++i) c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  return c;
}

double AwareConditional(uint64_t H, uint64_t x, uint64_t group_size, unsigned parity) {
  const uint64_t k = uint64_t{parity} + 1;  // failed members of one group that are catastrophic
  if (x < k) return 0.0;
  const double D = std::ceil(static_cast<double>(H) / static_cast<double>(group_size));
  const double p = D * Choose(group_size, k) * BinomialRatio(H, x, k);
  return std::min(p, 1.0);
}

std::string ValidateRisk(const RiskInput& in) {
  if (in.group_size < 2) return "group size must be at least 2 (got " + std::to_string(in.group_size) + ")";
  if (in.parity == 0) return "parity must be at least 1";
  if (in.parity >= in.group_size)
    return "parity (" + std::to_string(in.parity) + ") must be smaller than the group size (" +
           std::to_string(in.group_size) + ")";
  if (in.levels.empty()) return "no failure-domain levels given";
  if (in.aware_up_to > in.levels.size())
    return "t-awareness level " + std::to_string(in.aware_up_to) + " is beyond the " +
           std::to_string(in.levels.size()) + " levels given";
  for (size_t j = 0; j < in.levels.size(); ++j) {
    const Level& l = in.levels[j];
    if (l.count == 0) return "level " + l.name + " has no elements";
    if (!l.pmf) return "level " + l.name + " has no failure distribution";
    if (j < in.aware_up_to && l.count < in.group_size)
      return "level " + l.name + " has " + std::to_string(l.count) + " elements, fewer than the group size " +
             std::to_string(in.group_size) + ": a group's members cannot sit on distinct elements there";
  }
  return "";
}

RiskResult CatastrophicFailureProbability(const RiskInput& in) {
  RiskResult res;
  double total = 0;
  for (size_t j = 0; j < in.levels.size(); ++j) {
    const Level& l = in.levels[j];
    LevelRisk lr;
    lr.name = l.name;
    lr.aware = j < in.aware_up_to;
    double prev = 0;
    for (uint64_t x = 1; x <= l.count; ++x) {
      const double p = l.pmf(x);
      lr.p_any += p;
      lr.p_cf += lr.aware ? p * AwareConditional(l.count, x, in.group_size, in.parity) : p;
      if (x >= l.decreasing_from && p <= prev && p <= 1e-17 * lr.p_any) break;
      prev = p;
    }
    total += lr.p_cf;
    res.levels.push_back(lr);
  }
  res.p_cf = std::clamp(total, 0.0, 1.0);
  return res;
}

}  // namespace revive::resilience
