// `revive ls DIR [--local ROOT] [--json]`: the versions of a multi-level checkpoint, newest first, and how
// complete each is at every level (docs/storage-levels.md). Reads metas and manifests only.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/levels_offline.h"
#include "cli/hosts.h"
#include "cli/tlevels_ls.h"

namespace revive::cli {
namespace {

struct LsArgs {
  std::string dir, local;
  bool json = false;
  HostOpts ho;  // --hosts etc.: ask the hosts (transparent checkpoints)
};

std::string Ranks(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

nlohmann::json LevelJson(const std::vector<uint32_t>& have, uint32_t ranks, bool used) {
  return {{"complete", ranks > 0 && have.size() == ranks}, {"used", used}, {"ranks", have}};
}

const char* Mark(const std::vector<uint32_t>& have, uint32_t ranks, bool used) {
  if (!used) return "-";
  return have.size() == ranks ? "complete" : "incomplete";
}

int Ls(const LsArgs& a) {
  if (IsTransparentCheckpoint(a.dir)) return TransparentLs("revive ls", a.dir, a.local, a.json, false, a.ho);
  if (WantsHosts(a.ho)) {
    fprintf(stderr, "revive ls: %s: --hosts/--launcher ask the hosts of a transparent checkpoint's computation; this is "
            "an application-level one (its node-local pieces are looked for under --local)\n", a.dir.c_str());
    return 2;
  }
  Offline o;
  if (int rc = LoadForTool("revive ls", a.dir, a.local, &o)) return rc;
  nlohmann::json j;
  j["dir"] = o.global_dir;
  j["name"] = o.name;
  j["local_root"] = o.root;
  j["local_id"] = o.id;
  j["hosts"] = nlohmann::json::array();
  for (size_t h = 0; h < o.hosts.size(); ++h) j["hosts"].push_back({{"index", h}, {"name", o.hosts[h]}});
  j["problems"] = o.problems;
  j["versions"] = nlohmann::json::array();
  if (!a.json) {
    std::printf("checkpoint %s (%s)\nlocal root %s: %zu host(s)", o.name.c_str(), o.global_dir.c_str(), o.root.c_str(),
                o.hosts.size());
    for (size_t h = 0; h < o.hosts.size(); ++h) std::printf(" [%zu]%s", h, o.hosts[h].c_str());
    std::printf("\n%-8s %-10s %-6s %-10s %-10s %-10s %-11s %-9s %-11s %s\n", "VERSION", "ITERATION", "RANKS", "L1", "L2",
                "L3", "LOCAL", "L4", "SIZE", "HOSTS");
  }
  for (uint64_t v : o.AllVersions()) {
    LocalLevels L = AssessLocal(o, v);
    GlobalLevel G = AssessGlobal(o, v);
    nlohmann::json vj;
    vj["version"] = v;
    vj["iteration"] = G.manifest ? G.m.iteration : L.iteration;
    vj["ranks"] = G.manifest ? G.m.ranks : L.ranks;
    vj["local"] = {{"bytes", L.bytes},
                   {"hosts", L.hosts},
                   {"L1", LevelJson(L.l1, L.ranks, L.ranks > 0)},
                   {"L2", LevelJson(L.l2, L.ranks, L.l2_used)},
                   {"L3", LevelJson(L.l3, L.ranks, L.l3_used)},
                   {"restorable", L.restorable},
                   {"plan", L.summary},
                   {"why", L.restorable ? "" : L.why}};
    vj["L4"] = {{"present", G.dir}, {"complete", G.manifest}, {"bytes", G.bytes},
                {"iteration", G.manifest ? G.m.iteration : 0}, {"ranks", G.manifest ? G.m.ranks : 0},
                {"error", G.manifest ? "" : G.manifest_error}};
    j["versions"].push_back(vj);
    if (a.json) continue;
    std::string hosts;
    for (const auto& h : L.hosts) hosts += (hosts.empty() ? "" : ",") + h;
    const char* l4 = G.manifest ? "complete" : G.dir ? "partial" : "-";
    std::printf("v%-7llu %-10lld %-6u %-10s %-10s %-10s %-11s %-9s %-11s %s\n", static_cast<unsigned long long>(v),
                static_cast<long long>(vj["iteration"].get<int64_t>()), vj["ranks"].get<uint32_t>(),
                Mark(L.l1, L.ranks, L.ranks > 0), Mark(L.l2, L.ranks, L.l2_used), Mark(L.l3, L.ranks, L.l3_used),
                L.restorable ? "restorable" : "-", l4, Mib(G.manifest ? G.bytes : L.bytes).c_str(),
                hosts.empty() ? "-" : hosts.c_str());
    if (L.ranks > 0 && L.l1.size() != L.ranks)
      std::printf("         L1 has ranks %s of %u\n", Ranks(L.l1).c_str(), L.ranks);
    if (L.ranks > 0 && !L.restorable) std::printf("         not restorable from local levels: %s\n", L.why.c_str());
    else if (L.ranks > 0) std::printf("         local plan: %s\n", L.summary.c_str());
    if (G.dir && !G.manifest) std::printf("         L4: %s\n", G.manifest_error.c_str());
  }
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& p : o.problems) std::fprintf(stderr, "revive ls: ignoring %s\n", p.c_str());
  }
  if (j["versions"].empty()) {  // most likely a mistyped DIR or local root: say so, and fail
    std::fprintf(stderr, "revive ls: %s: no versions (neither L4 version directories nor pieces under %s)\n",
                 o.global_dir.c_str(), o.root.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void AddLsCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<LsArgs>();
  CLI::App* c = app.add_subcommand("ls", "List the versions of a multi-level checkpoint and their levels");
  c->footer("DIR is <base>/<name> (the global, L4 directory). Node-local pieces are looked for under ROOT\n"
            "(default REVIVE_LOCAL_PATH or /dev/shm/revive-<uid>): every ROOT/<host>/<id> is one host.\n"
            "L1: every rank's own copy on its host; L2: a copy on another host for every rank; L3: every\n"
            "rank's parity group whole; LOCAL: restorable from the local levels; L4: MANIFEST present.");
  AddDirOptions(c, &a->dir, &a->local);
  c->add_flag("--json", a->json, "Machine-readable output");
  c->add_option("--hosts", a->ho.hosts,
                "Transparent checkpoints: ask these hosts (h1,h2,... or slurm) what their node-local storage keeps, "
                "each through the launcher, as `revive restart --hosts` does");
  AddHostOptions(c, &a->ho);
  c->callback([a, rc] { *rc = Ls(*a); });
}

}  // namespace revive::cli
