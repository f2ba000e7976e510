#include "rma/rank_rebuild.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/checksum.h"
#include "mpi/failure_mesh.h"
#include "rma/loss_verdict.h"
#include "rma/rank_watch.h"
#include "rma/xor_code.h"

namespace revive::rma {
namespace {

// Group rank of world rank x: the group communicator is split with the world rank as key.
int GroupRank(const std::vector<int>& grp, int x) {
  return static_cast<int>(std::count_if(grp.begin(), grp.end(), [x](int m) { return m < x; }));
}

std::string GroupName(std::vector<int> grp) {
  std::sort(grp.begin(), grp.end());
  std::string s = "{";
  for (size_t i = 0; i < grp.size(); ++i) s += (i ? "," : "") + std::to_string(grp[i]);
  return s + "}";
}

// Optional: the rebuilt copy as a file, REVIVE_RMA_REBUILD_DIR/rank<f>.win<id>.ckpt<n> (padded length).
void WriteImage(int f, uint32_t id, uint64_t n, const std::vector<uint8_t>& data, size_t bytes, std::string* where) {
  const char* dir = getenv("REVIVE_RMA_REBUILD_DIR");
  if (!dir || !*dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.win%u.ckpt%" PRIu64, dir, f, id, n);
  FILE* out = fopen(path, "wb");
  const bool ok = out && fwrite(data.data(), 1, bytes, out) == bytes;
  if (out && fclose(out) != 0) *where = std::string("; could not write ") + path;
  else *where = ok ? std::string("; written to ") + path : std::string("; could not write ") + path;
}

}  // namespace

std::vector<WinGens> MyGens(const WatchState& st) {
  std::vector<WinGens> out;
  for (const WinCkpt* ck : st.wins.List()) {
    WinGens w;
    w.id = ck->id;
    for (int i = 0; i < 2; ++i) {
      const uint64_t n = ck->gen[i].ckpt.load();
      if (n && ck->Find(n) == &ck->gen[i]) w.ckpt[i] = n;
    }
    out.push_back(w);
  }
  return out;
}

void RebuildDead(revive::mpi::FailureMesh* mesh, int me, const std::vector<int>& dead,
                 const std::vector<std::vector<int>>& groups, const std::vector<std::vector<WinGens>>& gens,
                 const WatchState& st) {
  const auto is_dead = [&](int r) { return std::binary_search(dead.begin(), dead.end(), r); };
  for (const auto& grp : groups) {
    std::vector<int> lost, live;
    for (int m : grp) (is_dead(m) ? lost : live).push_back(m);
    if (lost.size() != 1 || live.empty() || std::find(live.begin(), live.end(), me) == live.end()) continue;
    std::sort(live.begin(), live.end());
    const int f = lost[0], collector = live[0], k = static_cast<int>(grp.size());
    const int gf = GroupRank(grp, f), gme = GroupRank(grp, me);
    std::vector<const std::vector<WinGens>*> reports;
    for (int s : live) reports.push_back(&gens[static_cast<size_t>(s)]);
    bool lost_peer = false;
    for (const WinCkpt* ck : st.wins.List()) {
      if (lost_peer) continue;
      const double t0 = Clock(CLOCK_MONOTONIC);
      const uint64_t n = NewestCommon(reports, ck->id);
      if (n == 0) {
        if (me == collector)
          fprintf(stderr, "revive-rma: cannot rebuild rank %d's window %u: no checkpoint of it is complete at every survivor of checksum group %s\n",
                  f, ck->id, GroupName(grp).c_str());
        continue;
      }
      // Every survivor reported checkpoint n complete and none can overwrite it now (its next checkpoint
      // would need the dead rank); still, a survivor that no longer finds it sends an empty share, so the
      // collector names it instead of waiting for a block that never comes.
      const CkptGen* gen = ck->Find(n);
      const size_t c = ChunkBytes(ck->padded, k);
      std::vector<uint8_t> mine;
      if (gen) {
        mine.resize(static_cast<size_t>(k - 1) * c);
        RebuildContribution(gen->copy.data(), ck->padded, gen->parity.data(), k, gme, gf, mine.data());
      }
      if (me != collector) {
        lost_peer = !mesh->SendBlock(collector, mine).ok();
        continue;
      }
      std::string err = gen ? "" : "checkpoint " + std::to_string(n) + " is no longer complete at rank " + std::to_string(me);
      for (int s : live) {
        if (s == me || !err.empty()) continue;
        std::vector<uint8_t> theirs;
        Status got = mesh->RecvBlock(s, &theirs);
        if (!got.ok() || theirs.size() != mine.size()) {
          err = got.ok() ? "rank " + std::to_string(s) + " has no share of checkpoint " + std::to_string(n) : got.ToString();
          continue;
        }
        for (size_t i = 0; i < mine.size(); ++i) mine[i] ^= theirs[i];
      }
      if (!err.empty()) {
        fprintf(stderr, "revive-rma: cannot rebuild rank %d's window %u: %s\n", f, ck->id, err.c_str());
        lost_peer = true;
        continue;
      }
      const MemberMeta& want = gen->meta[static_cast<size_t>(gf)];
      const uint64_t got = Checksum64(mine.data(), ck->padded);
      const double took = Clock(CLOCK_MONOTONIC) - t0;
      if (got == want.xxh3) {
        std::string where;
        WriteImage(f, ck->id, n, mine, ck->padded, &where);
        fprintf(stderr,
                "revive-rma: rebuilt rank %d's window %u as of checkpoint %" PRIu64 " (%zu bytes) from checksum group %s "
                "in %.6f s: XXH3-64 %016" PRIx64 " equals the one rank %d recorded: verified; its counters then: EC %" PRIu64
                " GC %" PRIu64 " GNC %" PRIu64 "%s\n",
                f, ck->id, n, ck->padded, GroupName(grp).c_str(), took, got, f, want.ec, want.gc, want.gnc, where.c_str());
      } else {
        fprintf(stderr,
                "revive-rma: refused the rebuild of rank %d's window %u as of checkpoint %" PRIu64 " from checksum group %s: "
                "the rebuilt copy's XXH3-64 %016" PRIx64 " is not the %016" PRIx64 " rank %d recorded (a damaged parity part or "
                "copy in the group)\n",
                f, ck->id, n, GroupName(grp).c_str(), got, want.xxh3, f);
      }
    }
    // The senders wait for the collector's word before they exit: a socket closed with unread data resets
    // the connection, which could drop shares still in flight.
    const std::vector<uint8_t> done(1, 1);
    std::vector<uint8_t> ack;
    if (me == collector) {
      for (int s : live)
        if (s != me) (void)mesh->SendBlock(s, done);
    } else if (!lost_peer) {
      (void)mesh->RecvBlock(collector, &ack);
    }
    fflush(stderr);
  }
}

}  // namespace revive::rma
