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

namespace {

// One survivor's report as it crosses the mesh: a fixed header, one LogGap byte per world rank, then
// kMaxWatchedWins WinGens (the complete in-memory checkpoints of each window, for the rebuild).
struct Wire {
  uint64_t epoch;
  double since_epoch;  // seconds from the last checkpoint to the death being seen
  double seen;         // CLOCK_REALTIME when this survivor saw the death (hosts' clocks: roughly in step)
  uint8_t in_checkpoint, unprotected, pad[6];
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
  std::vector<char> mine(sizeof(Wire) + n + kMaxWatchedWins * sizeof(WinGens), 0);
  Wire w{};
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
  const std::vector<WinGens> my_gens = MyGens(*st_);
  std::memcpy(mine.data() + sizeof w + n, my_gens.data(), my_gens.size() * sizeof(WinGens));
  std::vector<std::vector<char>> all;
  Status swapped = agreed.ok() ? mesh_->Exchange(mine, &all) : agreed;
  if (!agreed.ok()) all.assign(n, {}), all[static_cast<size_t>(rank_)] = mine;
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
    for (int i = 0; i < kMaxWatchedWins; ++i) {
      WinGens wg;
      std::memcpy(&wg, b.data() + sizeof x + n + static_cast<size_t>(i) * sizeof wg, sizeof wg);
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
