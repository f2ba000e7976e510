// Resilience arithmetic (pure math, no I/O): the optimum checkpoint interval (Young; Daly's higher-order
// estimate) and the probability of a catastrophic failure P_cf of parity groups placed over a hierarchy
// of failure domains, after the ftRMA paper (Besta & Hoefler, "Fault tolerance for remote memory
// access programming models", sections 5.2 and 7.1; ../shared/papers/ftrma-fault-tolerance-rma.txt).
// Used by `revive risk` (docs/storage-levels.md, "Risk and interval").
//
// It lives in revive_core rather than revive_storage because it depends on nothing (the sanitizer test
// stage links only core) and its second user, an automatic interval for launch/the coordinator, should
// not have to pull in the storage library.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace revive::resilience {

// ---- Checkpoint interval -----------------------------------------------------------------------------
// delta: time to take one checkpoint (seconds, > 0). mtbf: mean time between failures M (seconds, > 0).
// Both return the compute time between the end of one checkpoint and the start of the next (seconds).

// Young (1974), first order: sqrt(2 * delta * M).
double YoungInterval(double delta, double mtbf);

// Daly (2006), higher order, as quoted by the ftRMA paper (section 5.3, "Daly's Interval"):
//   tau = sqrt(2 δ M) · [1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] − δ   for δ < 2M,
//   tau = M                                                             for δ ≥ 2M.
// For δ → 0 it approaches Young's value.
double DalyInterval(double delta, double mtbf);

// ---- Probability of a catastrophic failure --------------------------------------------------------
// Symbols (paper, section 5.2):
//   h        number of levels of the failure-domain hierarchy (FDH). Level j = 1 is the INNERMOST
//            (smallest) failure domain, e.g. a node; level h the outermost, e.g. a rack.
//   H_j      number of elements at level j (e.g. 1400 nodes).
//   x_j      number of elements of level j that fail concurrently in the period (1 ≤ x_j ≤ H_j).
//   P_j(x_j) probability that exactly x_j elements of level j fail in the period. The paper fits
//            exponential densities to TSUBAME2.0's failure history; `revive risk` uses a Poisson law
//            with mean λ_j = (failures per day at level j) × (period in days), see PoissonPmf.
//   |G|      group size: the processes of one parity group, INCLUDING its m checksum processes
//            (paper: |G| = |P|/g + m).
//   m        parity (checksum) processes per group; a group survives m crashes, m + 1 are catastrophic.
//            The paper sets m = 1 (XOR).
//   n        t-awareness level: at levels 1..n the placement puts the members of a group on distinct
//            elements (paper eq. 6), so an element failure kills at most one member per group.
//            n = 0: no t-awareness.
//   D_j      = ceil(H_j / |G|): the number of disjoint element sets at level j that hold one group each
//            in the worst-case placement (paper, figure 8).
// Conditional probability that x_j failures at level j are catastrophic:
//   levels j ≤ n (paper eq. 8, m = 1):
//     P_j(cf | x_j) = D_j · C(|G|, 2) · C(H_j − 2, x_j − 2) / C(H_j, x_j)
//   generalised here to m parity processes (any m + 1 failed members of one group are catastrophic):
//     P_j(cf | x_j) = D_j · C(|G|, m+1) · C(H_j − (m+1), x_j − (m+1)) / C(H_j, x_j)
//   This counts, like the paper's, the failure sets that contain a catastrophic (m+1)-subset of one
//   group, with sets holding several such subsets counted several times: an upper bound, which can
//   exceed 1 when x_j is large; it is clamped to 1.
//   levels j > n (worst case, any element crash is catastrophic): P_j(cf | x_j) = 1.
// Total (paper eqs. 7 and 9; levels fail independently; summed, as in the paper, not 1 − Π(1 − ·)):
//   P_cf = Σ_{j=1..n} Σ_{x_j=1..H_j} P_j(x_j) · P_j(cf | x_j) + Σ_{j=n+1..h} Σ_{x_j=1..H_j} P_j(x_j).
// The result is clamped to [0, 1].

struct Level {
  std::string name;
  uint64_t count = 0;                   // H_j
  std::function<double(uint64_t)> pmf;  // P_j(x_j) for x_j ≥ 1
  // pmf is non-increasing for x ≥ decreasing_from: the sum over x may stop there once a term is
  // negligible (< 1e-17 of the level's running sum). Set by PoissonLevel to ceil(λ) + 1.
  uint64_t decreasing_from = 1;
};

// Poisson probability of exactly x events with mean lambda (lambda ≥ 0).
double PoissonPmf(double lambda, uint64_t x);

// A level whose failures are Poisson with mean failures_per_day × period_days.
Level PoissonLevel(std::string name, uint64_t count, double failures_per_day, double period_days);

// C(n, k) ratio C(H − k, x − k) / C(H, x) = Π_{i<k} (x − i)/(H − i); 0 when x < k.
double BinomialRatio(uint64_t H, uint64_t x, uint64_t k);

// P_j(cf | x_j) at a t-aware level (formula above). Requires group_size ≥ parity + 1.
double AwareConditional(uint64_t H, uint64_t x, uint64_t group_size, unsigned parity);

struct RiskInput {
  std::vector<Level> levels;  // innermost first: levels[0] is level j = 1
  uint64_t group_size = 0;    // |G|
  unsigned parity = 1;        // m
  unsigned aware_up_to = 0;   // n: levels[0..n-1] are t-aware
};

struct LevelRisk {
  std::string name;
  bool aware = false;
  double p_any = 0;  // Σ_{x=1..H} P_j(x): probability that at least one element of the level fails
  double p_cf = 0;   // this level's term of P_cf
};

struct RiskResult {
  double p_cf = 0;
  std::vector<LevelRisk> levels;  // same order as RiskInput::levels
};

// Checks the input; returns "" or a message naming the bad field (group size < 2, parity 0 or ≥ |G|,
// a level with no elements, aware_up_to > number of levels, a t-aware level with fewer elements than
// |G| — the members of one group cannot then sit on distinct elements).
std::string ValidateRisk(const RiskInput& in);

// P_cf for a valid input (see ValidateRisk). Sums each level's x from 1 to H_j, stopping early once
// the remaining terms of P_j are negligible (see Level::decreasing_from).
RiskResult CatastrophicFailureProbability(const RiskInput& in);

}  // namespace revive::resilience
