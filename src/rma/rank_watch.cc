#include "rma/rank_watch.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "mpi/failure_mesh.h"
#include "rma/loss_verdict.h"
#include "rma/rank_rebuild.h"

namespace revive::rma {

double Clock(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void WinSlots::Add(WinCkpt* w) {
  WinSlots* c = this;
  for (;; c = c->next_.load()) {
    for (auto& x : c->slot_)
      if (!x.load()) {
        x.store(w);
        return;
      }
    if (!c->next_.load()) break;
  }
  // Every slot is taken: chain a chunk, its first slot filled before the watcher can see it.
  auto* more = new WinSlots;
  more->slot_[0].store(w);
  c->next_.store(more);
}

void WinSlots::Remove(WinCkpt* w) {
  for (WinSlots* c = this; c; c = c->next_.load())
    for (auto& x : c->slot_) {
      WinCkpt* mine = w;
      if (x.compare_exchange_strong(mine, nullptr)) return;
    }
}

std::vector<WinCkpt*> WinSlots::List() const {
  std::vector<WinCkpt*> out;
  for (const WinSlots* c = this; c; c = c->next_.load())
    for (const auto& x : c->slot_)
      if (WinCkpt* w = x.load()) out.push_back(w);
  return out;
}

namespace {

// One survivor's report as it crosses the mesh: a fixed header, then one LogGap byte per world rank. Its
// windows' WinGens (the complete in-memory checkpoints of each, for the rebuild) follow in a second round,
// `wins` of them: the exchange needs one length at every survivor, the largest count, known after the first.
struct Wire {
  uint64_t epoch;
  double since_epoch;  // seconds from the last checkpoint to the death being seen
  double seen;         // CLOCK_REALTIME when this survivor saw the death (hosts' clocks: roughly in step)
  uint8_t in_checkpoint, unprotected, pad[2];
  uint32_t wins;
};

}  // namespace

RankWatch* RankWatch::Start(MPI_Comm comm, std::vector<std::vector<int>> groups, WatchState* st, std::string* err) {
  std::unique_ptr<revive::mpi::FailureMesh> mesh;
  Status s = revive::mpi::FailureMesh::Open(comm, &mesh);
  if (!s.ok()) {
    *err = s.ToString();
    return nullptr;
  }
  auto* w = new RankWatch;
  w->mesh_ = std::move(mesh);
  w->groups_ = std::move(groups);
  w->st_ = st;
  PMPI_Comm_rank(comm, &w->rank_);
  PMPI_Comm_size(comm, &w->size_);
  w->thread_ = std::thread([w] { w->Run(); });
  return w;
}

RankWatch::~RankWatch() {
  Stop();
}

void RankWatch::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void RankWatch::Run() {
  // poll() returns early on a signal (revive's checkpoint signal among them): Poll just looks again.
  while (!stop_.load())
    if (mesh_->Poll(100)) Report();
}

void RankWatch::Report() {
  const double seen = Clock(CLOCK_REALTIME), seen_mono = Clock(CLOCK_MONOTONIC);
  // Ranks of one host die together: gather the deaths of the next 0.3 s into one verdict.
  for (int i = 0; i < 3; ++i) mesh_->Poll(100);
  std::vector<int> dead;
  Status agreed = mesh_->Agree(&dead);
  // My report: the checkpoint count and what my logs lack about each rank.
  const size_t n = static_cast<size_t>(size_);
  const std::vector<WinGens> my_gens = MyGens(*st_);
  std::vector<char> mine(sizeof(Wire) + n, 0);
  Wire w{};
  w.wins = static_cast<uint32_t>(my_gens.size());
  w.epoch = st_->epoch.load();
  w.since_epoch = seen_mono - st_->epoch_time.load();
  w.seen = seen;
  w.in_checkpoint = st_->in_checkpoint.load() ? 1 : 0;
  w.unprotected = st_->unprotected.load() ? 1 : 0;
  std::memcpy(mine.data(), &w, sizeof w);
  for (size_t p = 0; p < n; ++p) {
    uint8_t bits = st_->put_gaps[p].load(std::memory_order_relaxed);
    if (st_->lost_flags && st_->lost_flags[p]) bits |= kGapGetLost;
    if (st_->n_flags && st_->n_flags[p]) bits |= kGapGetOpen;
    mine[sizeof w + p] = static_cast<char>(bits);
  }
  std::vector<std::vector<char>> all, all_gens;
  Status swapped = agreed.ok() ? mesh_->Exchange(mine, &all) : agreed;
  if (!agreed.ok()) all.assign(n, {}), all[static_cast<size_t>(rank_)] = mine;
  // Second round: every survivor's windows, padded (id 0) to the most any of them has. The counts differ
  // only after a death inside a window's creation or free.
  size_t most = 0;
  for (const auto& b : all)
    if (b.size() == mine.size()) {
      Wire x;
      std::memcpy(&x, b.data(), sizeof x);
      most = std::max<size_t>(most, x.wins);
    }
  if (swapped.ok() && most > 0) {
    std::vector<char> g(most * sizeof(WinGens), 0);
    std::memcpy(g.data(), my_gens.data(), my_gens.size() * sizeof(WinGens));
    swapped = mesh_->Exchange(g, &all_gens);
  }
  std::vector<SurvivorReport> reports;
  std::vector<std::vector<WinGens>> gens(n);
  double first = seen, last = seen, since = w.since_epoch;
  for (int p = 0; p < size_; ++p) {
    const auto& b = all[static_cast<size_t>(p)];
    if (b.size() != mine.size()) continue;
    Wire x;
    std::memcpy(&x, b.data(), sizeof x);
    SurvivorReport r;
    r.rank = p;
    r.epoch = x.epoch;
    r.in_checkpoint = x.in_checkpoint != 0;
    r.unprotected = x.unprotected != 0;
    r.gaps.assign(b.begin() + sizeof x, b.begin() + static_cast<long>(sizeof x + n));
    const auto& bg = all_gens.empty() ? std::vector<char>() : all_gens[static_cast<size_t>(p)];
    for (size_t i = 0; bg.size() == most * sizeof(WinGens) && i < most; ++i) {
      WinGens wg;
      std::memcpy(&wg, bg.data() + i * sizeof wg, sizeof wg);
      if (wg.id) gens[static_cast<size_t>(p)].push_back(wg);
    }
    reports.push_back(std::move(r));
    first = std::min(first, x.seen);
    last = std::max(last, x.seen);
    since = std::min(since, x.since_epoch);
  }
  // The lowest survivor speaks for all (one line per job, not one per rank).
  int lowest = -1;
  for (int p = 0; p < size_ && lowest < 0; ++p)
    if (!std::binary_search(dead.begin(), dead.end(), p)) lowest = p;
  if (lowest == rank_ || !swapped.ok()) {
    const LossVerdict v = JudgeLoss(dead, groups_, reports);
    std::string ep = v.epoch ? "checkpoint " + std::to_string(v.epoch) + " (" + std::to_string(since).substr(0, 5) + " s before)"
                             : "none";
    std::fprintf(stderr,
                 "revive-rma: %s died (seen by %zu survivors within %.3f s); last in-memory checkpoint: %s; "
                 "rebuildable from memory: %s: %s; no in-job recovery with this MPI: the survivors exit with status %d "
                 "(restart the job from its last checkpoint on stable storage, e.g. under revive run)%s%s\n",
                 RankList(dead).c_str(), reports.size(), last - first, ep.c_str(), v.rebuildable ? "yes" : "no",
                 v.why.c_str(), kRankLostExit, swapped.ok() ? "" : "; ", swapped.ok() ? "" : swapped.ToString().c_str());
    std::fflush(stderr);
  }
  // The groups that lost one member rebuild it, over the mesh (rank_rebuild.h).
  if (swapped.ok()) RebuildDead(mesh_.get(), rank_, dead, groups_, gens, *st_);
  // stdout is the program's: flushing it from here could wait on a lock its thread holds.
  _exit(kRankLostExit);
}

}  // namespace revive::rma
