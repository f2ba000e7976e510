#include "cli/tlevels_ls.h"

#include <cstdio>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "coord/manifest.h"
#include "coord/tlevels.h"
#include "coord/tparity.h"
#include "core/env.h"

namespace revive::cli {
namespace {

bool Intact(const std::string& path, uint64_t want) {
  uint64_t h = 0;
  return coord::FileXxh3(path, &h).ok() && (want == 0 || h == want);
}

bool ParityIntact(const std::string& gen_dir) {
  std::string text;
  coord::TParityMeta meta;
  return ReadFileToString(Env::Default(), gen_dir + "/parity.meta", &text).ok() &&
         coord::TParityMeta::Parse(text, gen_dir, &meta).ok() && Intact(gen_dir + "/parity", meta.parity_xxh3);
}

struct LevelState {
  bool used = false;
  std::vector<std::string> missing;  // "upid 3 (host h2)" or "host h2"
};

}  // namespace

bool IsTransparentCheckpoint(const std::string& dir) {
  uint64_t g = 0;
  return coord::FindNewestGeneration(Env::Default(), dir, &g, nullptr).ok();
}

int TransparentLs(const char* tool, const std::string& dir, const std::string& local, bool json, bool verify) {
  Env* env = Env::Default();
  std::vector<uint64_t> gens;
  Status s = coord::ListCompleteGenerations(env, dir, &gens);
  if (!s.ok() || gens.empty()) {
    fprintf(stderr, "%s: %s: %s\n", tool, dir.c_str(), s.ok() ? "no complete generation" : s.ToString().c_str());
    return 2;
  }
  nlohmann::json out = nlohmann::json::array();
  int rc = 0;
  if (!json) printf("%-10s %-6s %-10s %-12s %-12s %-12s %-12s\n", "generation", "procs", "levels", "L1", "L2", "L3", "L4");
  for (uint64_t g : gens) {
    coord::Manifest m;
    const std::string gd = coord::GenerationDir(dir, g);
    if (!(s = coord::ReadManifest(env, gd + "/MANIFEST.json", &m)).ok()) {
      fprintf(stderr, "%s: %s\n", tool, s.ToString().c_str());
      rc = 1;
      continue;
    }
    const unsigned lv = m.levels.empty() ? coord::kTL4 : coord::ParseTLevelNames(m.levels);
    const std::string root = local.empty() ? m.local_root : local;
    std::map<std::string, LevelState> st;
    for (const char* n : {"L1", "L2", "L3", "L4"}) st[n].used = lv & coord::ParseTLevelNames(n);
    std::map<std::string, bool> parity_checked;
    bool lacking = false;                   // an image no copy holds intact
    std::set<std::string> unusable;         // L3: members without intact images and parity
    for (const auto& p : m.procs) {
      const std::string who = "upid " + std::to_string(p.upid) + " (host " + p.host + ")";
      const bool l1 = p.local && Intact(coord::TLocalGenDir(root, p.host, m.job, g) + "/" + p.image, p.xxh3);
      const bool l2 = !p.l2.empty() && Intact(coord::TPartnerDir(root, p.l2, m.job, g, p.host) + "/" + p.image, p.xxh3);
      const bool l4 = Intact(gd + "/" + p.image, p.xxh3);
      if (st["L1"].used && !l1) st["L1"].missing.push_back(who);
      if (st["L2"].used && !l2) st["L2"].missing.push_back(who);
      if (st["L4"].used && !l4) st["L4"].missing.push_back(who);
      if (st["L3"].used && !parity_checked.count(p.host)) {
        parity_checked[p.host] = ParityIntact(coord::TLocalGenDir(root, p.host, m.job, g));
        if (!parity_checked[p.host]) st["L3"].missing.push_back("host " + p.host);
      }
      if (!l1 || !parity_checked[p.host]) unusable.insert(p.host);
      lacking |= !l1 && !l2 && !l4;
    }
    // What `revive restart` would find: every image somewhere, or rebuilt from at most m lost members.
    const bool newest_ok = !lacking || (st["L3"].used && unusable.size() <= m.parity);
    nlohmann::json j = {{"generation", g}, {"processes", m.procs.size()}, {"levels", m.levels.empty() ? "L4" : m.levels}};
    std::string line;
    for (auto& [n, ls] : st) {
      j[n] = {{"used", ls.used}, {"complete", ls.used && ls.missing.empty()}, {"missing", ls.missing}};
      char cell[16];
      snprintf(cell, sizeof cell, "%-12s", !ls.used ? "-" : ls.missing.empty() ? "complete" : "incomplete");
      line += std::string(" ") + cell;
    }
    if (json) out.push_back(j);
    else printf("%-10llu %-6zu %-10s%s\n", (unsigned long long)g, m.procs.size(), j["levels"].get<std::string>().c_str(),
                line.c_str());
    for (auto& [n, ls] : st)
      if (!json && ls.used && !ls.missing.empty()) {
        std::string list;
        for (const auto& x : ls.missing) list += (list.empty() ? "" : ", ") + x;
        printf("  %s missing or damaged: %s\n", n.c_str(), list.c_str());
      }
    if (verify && g == gens.front() && !newest_ok) rc = 1;
  }
  if (json) printf("%s\n", out.dump(2).c_str());
  if (verify && rc == 1)
    fprintf(stderr, "%s: %s: the newest generation has images that no level holds intact (see above)\n", tool, dir.c_str());
  return rc;
}

}  // namespace revive::cli
