#include "cli/tlevels_ls.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/tlevels_scan.h"
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
  std::set<std::string> unchecked;   // hosts holding pieces of this level whose storage is not visible here
};

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The host this tool runs on, as the hosts' parts name themselves (REVIVE_HOST_ID, else the host name).
std::string SelfHost() {
  if (const char* h = getenv("REVIVE_HOST_ID"); h != nullptr && *h) return h;
  char b[256] = "";
  return gethostname(b, sizeof b - 1) == 0 ? b : "";
}

// Hosts of generation m whose node-local storage this machine cannot see. A host's `<root>/<host>/`
// absent here is either lost or on another machine: when another host's storage is visible here (a
// shared view: a parallel file system as the local root, or hosts simulated as directories), it is lost
// and reported missing; when none is, or only this machine's own, nothing tells, so it is "not checked".
std::set<std::string> UnseenHosts(const coord::Manifest& m, const std::string& root, const std::string& self) {
  std::set<std::string> hosts, absent;
  for (const auto& p : m.procs) {
    hosts.insert(p.host);
    if (!p.l2.empty()) hosts.insert(p.l2);
  }
  bool shared = false;
  for (const auto& h : hosts) {
    if (!IsDir(root + "/" + h)) absent.insert(h);
    else if (h != self) shared = true;
  }
  return shared ? std::set<std::string>() : absent;
}

}  // namespace

bool IsTransparentCheckpoint(const std::string& dir) {
  uint64_t g = 0;
  return coord::FindNewestGeneration(Env::Default(), dir, &g, nullptr).ok();
}

int TransparentLs(const char* tool, const std::string& dir, const std::string& local, bool json, bool verify,
                  const HostOpts& ho) {
  Env* env = Env::Default();
  std::vector<uint64_t> gens;
  Status s = coord::ListCompleteGenerations(env, dir, &gens);
  if (!s.ok() || gens.empty()) {
    fprintf(stderr, "%s: %s: %s\n", tool, dir.c_str(), s.ok() ? "no complete generation" : s.ToString().c_str());
    return 2;
  }
  // --hosts: each listed host is asked what it keeps (its `revive tlevels-scan`, as `revive restart
  // --hosts` does), under the computation's own local root; the others are looked at from here.
  std::set<std::string> asked;
  std::map<std::string, HostPieces> pieces;
  if (WantsHosts(ho)) {
    std::vector<std::string> hosts;
    std::string self;
    coord::Manifest newest;
    if (!(s = ResolveHosts(ho, &hosts)).ok() || !(s = CheckLauncher(ho, hosts.empty() ? "" : hosts[0])).ok() ||
        !(s = SelfPath(&self)).ok() ||
        !(s = coord::ReadManifest(env, coord::GenerationDir(dir, gens.front()) + "/MANIFEST.json", &newest)).ok()) {
      fprintf(stderr, "%s: %s\n", tool, s.ToString().c_str());
      return 2;
    }
    asked.insert(hosts.begin(), hosts.end());
    asked.erase("");
    pieces = ScanHosts(tool, ho, self, asked, newest.local_root, newest.job);
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
    std::set<std::string> unseen = lv & coord::kTL1 ? UnseenHosts(m, root, SelfHost()) : std::set<std::string>();
    for (const auto& h : asked) {  // an asked host is seen if it answered, whatever this machine sees
      if (pieces.count(h)) unseen.erase(h);
      else unseen.insert(h);
    }
    auto asked_own = [&](const std::string& h, const coord::ManifestProc& p) {
      auto& own = pieces[h].own[g];
      auto it = own.find(p.image);
      return it != own.end() && it->second == p.xxh3;
    };
    auto asked_copy = [&](const std::string& h, const coord::ManifestProc& p) {
      auto& copy = pieces[h].copy[g][p.host];
      auto it = copy.find(p.image);
      return it != copy.end() && it->second == p.xxh3;
    };
    std::map<std::string, LevelState> st;
    for (const char* n : {"L1", "L2", "L3", "L4"}) st[n].used = lv & coord::ParseTLevelNames(n);
    std::map<std::string, bool> parity_checked;
    bool lacking = false;                   // an image no copy holds intact
    bool unknown = false;                   // ... as far as can be seen from here: some of its holders are unseen
    std::set<std::string> unusable;         // L3: members without intact images and parity (or unseen)
    for (const auto& p : m.procs) {
      const std::string who = "upid " + std::to_string(p.upid) + " (host " + p.host + ")";
      const bool seen1 = !unseen.count(p.host), seen2 = !p.l2.empty() && !unseen.count(p.l2);
      const bool l1 = p.local && seen1 &&
                      (asked.count(p.host) ? asked_own(p.host, p)
                                           : Intact(coord::TLocalGenDir(root, p.host, m.job, g) + "/" + p.image, p.xxh3));
      const bool l2 = seen2 && (asked.count(p.l2) ? asked_copy(p.l2, p)
                                                  : Intact(coord::TPartnerDir(root, p.l2, m.job, g, p.host) + "/" + p.image, p.xxh3));
      const bool l4 = Intact(gd + "/" + p.image, p.xxh3);
      if (st["L1"].used && !l1) seen1 ? st["L1"].missing.push_back(who) : (void)st["L1"].unchecked.insert(p.host);
      if (st["L2"].used && !l2) seen2 ? st["L2"].missing.push_back(who) : (void)st["L2"].unchecked.insert(p.l2);
      if (st["L4"].used && !l4) st["L4"].missing.push_back(who);
      if (st["L3"].used && !parity_checked.count(p.host)) {
        parity_checked[p.host] = seen1 && (asked.count(p.host) ? pieces[p.host].parity[g]
                                                               : ParityIntact(coord::TLocalGenDir(root, p.host, m.job, g)));
        if (!seen1) st["L3"].unchecked.insert(p.host);
        else if (!parity_checked[p.host]) st["L3"].missing.push_back("host " + p.host);
      }
      if (!l1 || !parity_checked[p.host]) unusable.insert(p.host);
      if (!l1 && !l2 && !l4) (seen1 && (p.l2.empty() || seen2) ? lacking : unknown) = true;
    }
    // What `revive restart` would find: every image somewhere, or rebuilt from at most m lost members.
    bool unseen_member = false;
    for (const auto& h : unusable) unseen_member |= unseen.count(h) > 0;
    const bool newest_ok = (!lacking && !unknown) || (st["L3"].used && unusable.size() <= m.parity);
    // Not restorable from what is visible, but hosts not seen from here might hold what is missing.
    const bool newest_unchecked = !newest_ok && (unknown || unseen_member) && !lacking;
    nlohmann::json j = {{"generation", g}, {"processes", m.procs.size()}, {"levels", m.levels.empty() ? "L4" : m.levels}};
    std::string line;
    for (auto& [n, ls] : st) {
      j[n] = {{"used", ls.used}, {"complete", ls.used && ls.missing.empty() && ls.unchecked.empty()},
              {"missing", ls.missing}, {"unchecked_hosts", ls.unchecked}};
      char cell[16];
      snprintf(cell, sizeof cell, "%-12s", !ls.used                ? "-"
                                           : !ls.missing.empty()   ? "incomplete"
                                           : !ls.unchecked.empty() ? "unchecked"
                                                                   : "complete");
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
    for (auto& [n, ls] : st)
      if (!json && ls.used && !ls.unchecked.empty()) {
        std::string list, failed;
        for (const auto& h : ls.unchecked) (asked.count(h) ? failed : list) += ((asked.count(h) ? failed : list).empty() ? "" : ", ") + h;
        if (!list.empty())
          printf("  %s not checked: host(s) %s: their node-local storage (%s/<host>) is not visible on this machine "
                 "(`--hosts` asks the hosts)\n", n.c_str(), list.c_str(), root.c_str());
        if (!failed.empty())
          printf("  %s not checked: host(s) %s could not be asked (see above)\n", n.c_str(), failed.c_str());
      }
    if (verify && g == gens.front() && !newest_ok) rc = newest_unchecked ? 3 : 1;
  }
  if (json) printf("%s\n", out.dump(2).c_str());
  if (verify && rc == 1)
    fprintf(stderr, "%s: %s: the newest generation has images that no level holds intact (see above)\n", tool, dir.c_str());
  if (verify && rc == 3)
    fprintf(stderr, "%s: %s: the newest generation cannot be checked from here: the levels visible on this machine do "
            "not hold every image, and the hosts whose storage is not visible may (see above)\n", tool, dir.c_str());
  return rc;
}

}  // namespace revive::cli
