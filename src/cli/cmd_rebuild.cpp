// `revive rebuild DIR [--local ROOT] [--version N]`: for a version restorable from the local levels,
// writes back what is missing or damaged: every rank's own copy on its home host (read from a copy or
// rebuilt from its group's parity), partner copies (L2) where a rank has none on another host, and the
// parity pieces (L3) of every group, re-encoded from all members' data. Damaged pieces are set aside
// (Catalog::MarkBad) and the version planned again, as the restart does.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/levels_offline.h"
#include "core/checksum.h"
#include "storage/erasure.h"
#include "storage/placement.h"
#include "storage/stripes.h"

namespace revive::cli {
namespace {
using storage::PieceMeta;

struct RebuildArgs {
  std::string dir, local;
  uint64_t version = 0;
  std::vector<std::string> host_of;  // "R=HOST": where rank R's pieces go when no surviving piece names its host
};

int Rebuild(const RebuildArgs& a) {
  Offline o;
  uint64_t v = 0;
  if (int rc = LoadForTool("revive rebuild", a.dir, a.local, &o, true, a.version, &v)) return rc;
  Progress progress;
  std::vector<std::string> bytes, damaged;
  storage::VersionPlan plan;
  std::string why;
  // Every piece is read first, so damaged ones are known (and replaced) even when the plan does not need them.
  for (const auto& [h, m] : o.pieces) {
    if (m.version != v) continue;
    std::string b;
    Status r = o.stores[static_cast<size_t>(h)]->ReadPiece(m, &b);
    if (!r.ok()) {
      std::printf("damaged: %s\n", r.ToString().c_str());
      o.catalog.MarkBad(h, m.kind, m.rank, v);
    }
  }
  if (!RestoreLocal(o, v, &bytes, &plan, &damaged, &why, &progress)) {
    for (const auto& d : damaged) std::printf("damaged: %s\n", d.c_str());
    std::fprintf(stderr, "revive rebuild: %s: version %llu is not restorable from the local levels: %s\n",
                 o.global_dir.c_str(), static_cast<unsigned long long>(v), why.c_str());
    return 1;
  }
  for (const auto& d : damaged) std::printf("damaged: %s\n", d.c_str());
  const uint32_t ranks = plan.ranks;
  std::vector<std::string> home(ranks);
  for (uint32_t r = 0; r < ranks; ++r) home[r] = o.HomeOf(v, r);
  for (const std::string& h : a.host_of) {
    const size_t eq = h.find('=');
    char* end = nullptr;
    const unsigned long r = eq == std::string::npos ? ranks : std::strtoul(h.c_str(), &end, 10);
    if (eq == std::string::npos || end != h.c_str() + eq || r >= ranks || eq + 1 == h.size()) {
      std::fprintf(stderr, "revive rebuild: --host-of %s: expected RANK=HOST with RANK < %u\n", h.c_str(), ranks);
      return 2;
    }
    if (!home[r].empty() && home[r] != h.substr(eq + 1)) {
      std::fprintf(stderr, "revive rebuild: --host-of %s: the pieces say rank %lu ran on %s\n", h.c_str(), r,
                   home[r].c_str());
      return 2;
    }
    home[r] = h.substr(eq + 1);
  }
  // What is usable now (not marked bad).
  std::set<uint32_t> own, copy;
  std::map<uint32_t, const PieceMeta*> parity;
  bool l2_used = false;
  for (const auto& ref : o.catalog.Pieces(v)) {
    const PieceMeta& m = *ref.meta;
    if (m.ranks != ranks || m.rank >= ranks) continue;
    const std::string& at = o.hosts[static_cast<size_t>(ref.holder)];
    if (m.kind == PieceMeta::kData) {
      if (at == home[m.rank] && m.holder_host == m.host) own.insert(m.rank);
      if (m.holder_host != m.host) copy.insert(m.rank);
    } else {
      parity[m.rank] = &m;
    }
  }
  for (const auto& [h, m] : o.pieces) l2_used = l2_used || (m.version == v && m.kind == PieceMeta::kData && m.holder_host != m.host);
  int wrote = 0, failed = 0;
  auto data_meta = [&](uint32_t r, const std::string& holder) {
    PieceMeta m;
    m.kind = PieceMeta::kData;
    m.name = o.name;
    m.version = v;
    m.iteration = plan.iteration;
    m.parent_version = plan.parent_version;
    m.ranks = ranks;
    m.rank = r;
    m.host = home[r];
    m.holder_host = holder;
    m.length = bytes[r].size();
    m.checksum = Checksum64(bytes[r].data(), bytes[r].size());
    m.keys = plan.keys;
    return m;
  };
  auto write = [&](const std::string& host, const PieceMeta& m, const std::string& b, const std::string& what) {
    if (host.empty()) {  // every piece naming the rank's host is gone (e.g. L1+L3 without L2, host lost)
      std::fprintf(stderr, "revive rebuild: %s not written: its host is unknown (no surviving piece names it; "
                   "give it with --host-of RANK=HOST)\n",
                   what.c_str());
      ++failed;
      return;
    }
    storage::LocalStore store = o.StoreFor(host);
    progress.Show("writing " + what + " (" + Mib(b.size()) + ")");
    Status w = store.WritePiece(m, b.data(), b.size());
    progress.Done();
    if (w.ok()) {
      std::printf("rebuilt %s: %s\n", what.c_str(), store.PiecePath(v, m).c_str());
      ++wrote;
    } else {
      std::fprintf(stderr, "revive rebuild: %s: %s\n", store.PiecePath(v, m).c_str(), w.ToString().c_str());
      ++failed;
    }
  };
  // L1: each rank's own copy on its home host.
  for (uint32_t r = 0; r < ranks; ++r)
    if (!own.count(r))
      write(home[r], data_meta(r, home[r]), bytes[r], "rank " + std::to_string(r) + "'s own copy (L1)");
  // L2: a copy on another host, placed as the library places partners (failure domain = host).
  if (l2_used) {
    std::vector<int> partner;
    Status p = storage::Partners(home, 0, &partner);
    for (uint32_t r = 0; r < ranks; ++r) {
      if (copy.count(r)) continue;
      if (!p.ok()) {
        std::fprintf(stderr, "revive rebuild: rank %u: cannot place a partner copy: %s\n", r, p.ToString().c_str());
        ++failed;
        continue;
      }
      const std::string& at = home[static_cast<size_t>(partner[r])];
      write(at, data_meta(r, at), bytes[r], "rank " + std::to_string(r) + "'s partner copy (L2)");
    }
  }
  // L3: re-encode every group that lost a parity piece.
  std::set<std::vector<uint32_t>> done;
  std::vector<const PieceMeta*> groups;
  for (const auto& [h, m] : o.pieces)
    if (m.version == v && m.kind == PieceMeta::kParity && m.ranks == ranks && done.insert(m.members).second)
      groups.push_back(&m);
  for (const PieceMeta* grp : groups) {
    bool whole = true;
    for (uint32_t q : grp->members) {
      auto it = parity.find(q);
      whole = whole && it != parity.end() && it->second->members == grp->members && it->second->checksums == grp->checksums;
    }
    if (whole) continue;
    const size_t g = grp->members.size();
    std::vector<std::string_view> data;
    uint64_t maxlen = 0;
    bool ok = true;
    for (size_t i = 0; i < g; ++i) {
      const std::string& b = bytes[grp->members[i]];
      ok = ok && b.size() == grp->lengths[i] && Checksum64(b.data(), b.size()) == grp->checksums[i];
      data.emplace_back(b);
      maxlen = std::max(maxlen, grp->lengths[i]);
    }
    if (!ok) {
      std::fprintf(stderr, "revive rebuild: a group's data no longer matches its parity description; not re-encoding\n");
      ++failed;
      continue;
    }
    storage::StripeLayout layout(static_cast<int>(g), grp->parity, maxlen);
    std::unique_ptr<storage::ErasureCode> code;
    std::vector<std::string> out;
    Status e = storage::ErasureCode::Make(layout.k(), grp->parity, &code);
    if (e.ok()) e = storage::EncodeGroup(*code, layout, data, &out);
    if (!e.ok()) {
      std::fprintf(stderr, "revive rebuild: encoding group: %s\n", e.ToString().c_str());
      ++failed;
      continue;
    }
    for (size_t i = 0; i < g; ++i) {
      const uint32_t q = grp->members[i];
      auto it = parity.find(q);
      if (it != parity.end() && it->second->members == grp->members && it->second->checksums == grp->checksums) continue;
      PieceMeta pm = *grp;
      pm.rank = q;
      pm.host = pm.holder_host = home[q];
      pm.parity_length = out[i].size();
      pm.parity_checksum = Checksum64(out[i].data(), out[i].size());
      write(home[q], pm, out[i], "rank " + std::to_string(q) + "'s parity (L3)");
    }
  }
  std::printf("version %llu: %d piece(s) rebuilt%s\n", static_cast<unsigned long long>(v), wrote,
              failed ? (", " + std::to_string(failed) + " failed").c_str() : "");
  return failed ? 1 : 0;
}

}  // namespace

void AddRebuildCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<RebuildArgs>();
  CLI::App* c = app.add_subcommand("rebuild", "Recreate missing or damaged node-local pieces of a version");
  c->footer("For a version restorable from the local levels (default: the newest), writes every rank's own\n"
            "copy back to its host, a partner copy where a rank has none on another host (partners placed as\n"
            "the library does with the host as failure domain), and re-encodes lost parity pieces.");
  AddDirOptions(c, &a->dir, &a->local);
  c->add_option("--version", a->version, "Version to rebuild (default: the newest with local pieces)");
  c->add_option("--host-of", a->host_of, "RANK=HOST: the host of a rank none of whose pieces survived (repeatable)");
  c->callback([a, rc] { *rc = Rebuild(*a); });
}

}  // namespace revive::cli
