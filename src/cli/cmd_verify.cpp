// `revive verify DIR [--local ROOT] [--version N] [--json]`: reads every node-local piece (length and
// checksum against its meta) and every L4 data file, names each damaged or missing one, and says per
// version whether it can be restored from the local levels and/or from L4. Exit status: 0 when the newest
// version is restorable from some level, 1 otherwise, 2 on usage errors; for a transparent checkpoint 3 when
// it is not restorable from what this machine sees but hosts whose storage it cannot see may hold the rest.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/levels_offline.h"
#include "cli/hosts.h"
#include "cli/tlevels_ls.h"
#include "storage/placement.h"

namespace revive::cli {
namespace {
using storage::PieceMeta;

struct VerifyArgs {
  std::string dir, local;
  uint64_t version = 0;
  bool json = false;
  HostOpts ho;  // --hosts etc.: ask the hosts (transparent checkpoints)
};

struct Finding {
  std::string file, reason;
};

int Verify(const VerifyArgs& a) {
  if (IsTransparentCheckpoint(a.dir)) return TransparentLs("revive verify", a.dir, a.local, a.json, true, a.ho);
  if (WantsHosts(a.ho)) {
    fprintf(stderr, "revive verify: %s: --hosts/--launcher ask the hosts of a transparent checkpoint's computation; this is "
            "an application-level one (its node-local pieces are looked for under --local)\n", a.dir.c_str());
    return 2;
  }
  Offline o;
  if (int rc = LoadForTool("revive verify", a.dir, a.local, &o)) return rc;
  std::vector<uint64_t> versions = o.AllVersions();
  if (versions.empty()) {
    std::fprintf(stderr, "revive verify: %s: no versions (local root %s)\n", o.global_dir.c_str(), o.root.c_str());
    return 1;
  }
  const uint64_t newest = versions.front();
  if (a.version) {
    if (std::find(versions.begin(), versions.end(), a.version) == versions.end()) {
      std::fprintf(stderr, "revive verify: %s: no version %llu\n", o.global_dir.c_str(),
                   static_cast<unsigned long long>(a.version));
      return 1;
    }
    versions = {a.version};
  }
  nlohmann::json j;
  j["dir"] = o.global_dir;
  j["local_root"] = o.root;
  j["hosts"] = o.hosts;
  j["problems"] = o.problems;  // metas that do not decode: named, otherwise ignored
  j["versions"] = nlohmann::json::array();
  bool newest_ok = false, checked_newest = false;
  class Progress progress;  // levels_offline.h's (common.h has a function of that name)
  for (uint64_t v : versions) {
    std::vector<Finding> damaged, missing;
    // Every piece's bytes.
    size_t n = 0, total = 0;
    for (const auto& [h, m] : o.pieces) total += m.version == v;
    for (const auto& [h, m] : o.pieces) {
      if (m.version != v) continue;
      progress.Show("v" + std::to_string(v) + ": reading piece " + std::to_string(++n) + "/" + std::to_string(total));
      std::string bytes;
      Status r = o.stores[static_cast<size_t>(h)]->ReadPiece(m, &bytes);
      if (!r.ok()) {
        damaged.push_back({o.stores[static_cast<size_t>(h)]->PiecePath(v, m), r.ToString()});
        o.catalog.MarkBad(h, m.kind, m.rank, v);
      }
    }
    progress.Done();
    // Pieces that should be there.
    LocalLevels L = AssessLocal(o, v);
    std::set<uint32_t> l1(L.l1.begin(), L.l1.end()), l2(L.l2.begin(), L.l2.end());
    std::set<uint32_t> has_parity;
    std::vector<const PieceMeta*> groups;
    for (const auto& [h, m] : o.pieces)
      if (m.version == v && m.kind == PieceMeta::kParity) {
        has_parity.insert(m.rank);
        groups.push_back(&m);
      }
    std::vector<std::string> homes;
    for (uint32_t r = 0; r < L.ranks; ++r) homes.push_back(o.HomeOf(v, r));
    std::vector<int> partner;
    if (L.l2_used && !storage::Partners(homes, 0, &partner).ok()) partner.clear();
    for (uint32_t r = 0; r < L.ranks; ++r) {
      const std::string& home = homes[r];
      PieceMeta d;
      d.kind = PieceMeta::kData;
      d.rank = r;
      d.version = v;
      const std::string who = "rank " + std::to_string(r);
      if (!l1.count(r))
        missing.push_back({home.empty() ? who : o.PiecePath(home, d), "missing (" + who + "'s own copy, L1" +
                                                                          (home.empty() ? "; its host is unknown)" : ")")});
      if (L.l2_used && !l2.count(r)) {
        // Where the library puts it when the failure domain is the host (storage::Partners).
        const std::string at = partner.empty() ? "" : o.HomeOf(v, static_cast<uint32_t>(partner[r]));
        missing.push_back({at.empty() || home.empty() ? who : o.PiecePath(at, d),
                           "missing (" + who + "'s partner copy, L2: no copy on another host)"});
      }
      if (L.l3_used && !has_parity.count(r)) {
        bool member = false;
        for (const PieceMeta* g : groups) member = member || g->MemberIndex(r) >= 0;
        PieceMeta p = d;
        p.kind = PieceMeta::kParity;
        if (member)
          missing.push_back({home.empty() ? who : o.PiecePath(home, p), "missing (" + who + "'s parity, L3" +
                                                                            (home.empty() ? "; its host is unknown)" : ")")});
      }
    }
    // Restorable from the local levels: actually rebuild every rank's bytes (with the damaged pieces set aside).
    std::vector<std::string> bytes, more;
    storage::VersionPlan plan;
    std::string why;
    bool local_ok = L.ranks > 0 && RestoreLocal(o, v, &bytes, &plan, &more, &why, &progress);
    for (const auto& m : more) damaged.push_back({"", m});
    if (L.ranks == 0) why = "no local pieces";
    GlobalLevel G = VerifyGlobal(o, v);
    const bool global_ok = G.manifest && G.damaged.empty();
    if (v == newest) {
      checked_newest = true;
      newest_ok = local_ok || global_ok;
    }
    nlohmann::json vj;
    vj["version"] = v;
    vj["local"] = {{"restorable", local_ok}, {"plan", local_ok ? plan.Summary() : ""}, {"why", local_ok ? "" : why}};
    vj["L4"] = {{"restorable", global_ok}, {"complete", G.manifest}, {"problems", G.damaged}};
    vj["damaged"] = nlohmann::json::array();
    vj["missing"] = nlohmann::json::array();
    for (const auto& f : damaged) vj["damaged"].push_back({{"file", f.file}, {"reason", f.reason}});
    for (const auto& f : missing) vj["missing"].push_back({{"file", f.file}, {"reason", f.reason}});
    j["versions"].push_back(vj);
    if (a.json) continue;
    std::printf("version %llu: local levels %s; L4 %s\n", static_cast<unsigned long long>(v),
                local_ok ? ("restorable (" + plan.Summary() + ")").c_str() : ("NOT restorable: " + why).c_str(),
                global_ok ? "restorable" : G.dir ? "NOT restorable" : "absent");
    for (const auto& f : damaged) std::printf("  damaged: %s%s%s\n", f.file.c_str(), f.file.empty() ? "" : ": ", f.reason.c_str());
    for (const auto& f : missing) std::printf("  missing: %s: %s\n", f.file.c_str(), f.reason.c_str());
    for (const auto& p : G.damaged) std::printf("  L4: %s\n", p.c_str());
  }
  if (!checked_newest) {  // --version named an older one: the exit status is still about the newest
    LocalLevels L = AssessLocal(o, newest);
    GlobalLevel G = VerifyGlobal(o, newest);
    newest_ok = L.restorable || (G.manifest && G.damaged.empty());
  }
  j["newest"] = newest;
  j["newest_restorable"] = newest_ok;
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& p : o.problems) std::printf("ignored: %s\n", p.c_str());
    std::printf("newest version %llu is %s\n", static_cast<unsigned long long>(newest),
                newest_ok ? "restorable" : "NOT restorable from any level");
  }
  return newest_ok ? 0 : 1;
}

}  // namespace

void AddVerifyCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* c = app.add_subcommand("verify", "Check every piece and file of a multi-level checkpoint");
  c->footer("Reads every node-local piece and every L4 data file, names each damaged or missing one, and says\n"
            "per version whether it is restorable from the local levels and/or L4.\n"
            "Exit status: 0 if the newest version is restorable from some level, 1 if not, 2 on errors.");
  AddDirOptions(c, &a->dir, &a->local);
  c->add_option("--version", a->version, "Check only this version");
  c->add_flag("--json", a->json, "Machine-readable output");
  c->add_option("--hosts", a->ho.hosts,
                "Transparent checkpoints: ask these hosts (h1,h2,... or slurm) what their node-local storage keeps, "
                "each through the launcher, as `revive restart --hosts` does");
  AddHostOptions(c, &a->ho);
  c->callback([a, rc] { *rc = Verify(*a); });
}

}  // namespace revive::cli
