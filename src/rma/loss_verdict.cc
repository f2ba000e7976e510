#include "rma/loss_verdict.h"

#include <algorithm>

namespace revive::rma {

std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

namespace {
std::string Members(const std::vector<int>& g) {
  std::string s = "{";
  for (size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
  return s + "}";
}
}  // namespace

LossVerdict JudgeLoss(const std::vector<int>& dead, const std::vector<std::vector<int>>& groups,
                      const std::vector<SurvivorReport>& reports) {
  LossVerdict v;
  // Checkpoints are coordinated, so every survivor counts the same number unless one was already inside
  // the next: then the parity parts are a mix of two checkpoints.
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& r : reports) {
    lo = std::min(lo, r.epoch);
    hi = std::max(hi, r.epoch);
  }
  v.epoch = reports.empty() ? 0 : lo;
  if (reports.empty()) {
    v.why = "no survivor reported";
    return v;
  }
  if (v.epoch == 0) {
    v.why = "no in-memory checkpoint had been taken yet";
    return v;
  }
  for (const auto& r : reports)
    if (r.in_checkpoint || lo != hi) {
      v.why = "checkpoint " + std::to_string(v.epoch + 1) + " was being taken (rank " + std::to_string(r.rank) +
              " inside it): the survivors' copies already hold it and its parity is incomplete";
      return v;
    }
  for (const auto& r : reports)
    if (r.unprotected) {
      v.why = "rank " + std::to_string(r.rank) + " has a window on a sub-communicator, which is never checkpointed";
      return v;
    }
  for (const auto& g : groups) {
    std::vector<int> lost;
    for (int m : g)
      if (std::binary_search(dead.begin(), dead.end(), m)) lost.push_back(m);
    if (lost.size() > 1) {
      v.why = "checksum group " + Members(g) + " lost " + RankList(lost) + ": its parity rebuilds one member";
      return v;
    }
  }
  if (dead.size() > 1) {
    v.why = RankList(dead) + " died together: what each logged of its own accesses to the others since "
            "checkpoint " + std::to_string(v.epoch) + " was only in its memory";
    return v;
  }
  const int d = dead.empty() ? -1 : dead[0];
  std::string open;
  for (const auto& r : reports) {
    const uint8_t bits = d >= 0 && static_cast<size_t>(d) < r.gaps.size() ? r.gaps[static_cast<size_t>(d)] : 0;
    if (bits & kGapPutLayout) {
      v.why = "rank " + std::to_string(r.rank) + " put to rank " + std::to_string(d) +
              " with a non-contiguous target type since checkpoint " + std::to_string(v.epoch) + " (logged without its layout)";
      return v;
    }
    if (bits & kGapGetLost) {
      v.why = "rank " + std::to_string(d) + "'s get log at rank " + std::to_string(r.rank) +
              " overflowed since checkpoint " + std::to_string(v.epoch) + " (REVIVE_RMA_LG_BYTES)";
      return v;
    }
    if (bits & kGapGetOpen) open += (open.empty() ? "" : ",") + std::to_string(r.rank);
  }
  std::string grp;
  for (const auto& g : groups)
    if (std::find(g.begin(), g.end(), d) != g.end()) grp = Members(g);
  v.rebuildable = !grp.empty();
  if (!v.rebuildable) {
    v.why = "rank " + std::to_string(d) + " is in no checksum group";
    return v;
  }
  v.why = "checksum group " + grp + " lost only rank " + std::to_string(d) + ", the logs of its accesses since checkpoint " +
          std::to_string(v.epoch) + " are complete";
  if (!open.empty()) v.why += " (its gets of the open epoch at rank(s) " + open + " were not logged yet: a replay stops before that epoch)";
  return v;
}

uint64_t NewestCommon(const std::vector<const std::vector<WinGens>*>& survivors, uint32_t id) {
  uint64_t best = 0;
  if (survivors.empty()) return 0;
  for (const WinGens& w : *survivors[0]) {
    if (w.id != id) continue;
    for (uint64_t n : w.ckpt) {
      if (n == 0 || n <= best) continue;
      bool all = true;
      for (size_t s = 1; s < survivors.size() && all; ++s) {
        bool has = false;
        for (const WinGens& o : *survivors[s])
          if (o.id == id && (o.ckpt[0] == n || o.ckpt[1] == n)) has = true;
        all = has;
      }
      if (all) best = n;
    }
  }
  return best;
}

}  // namespace revive::rma
