#include "launch/placement.h"

#include <stdlib.h>

#include "launch/hostlist.h"

namespace revive::launch {

Status ParseMap(const std::string& spec, std::map<uint64_t, std::string>* pins) {
  pins->clear();
  for (const std::string& e : SplitCommas(spec)) {
    size_t eq = e.find('=');
    char* end = nullptr;
    unsigned long long upid = eq == std::string::npos ? 0 : strtoull(e.c_str(), &end, 10);
    if (eq == std::string::npos || eq == 0 || end != e.c_str() + eq || upid == 0)
      return Status::InvalidArgument("--map \"" + spec + "\": \"" + e + "\" is not UPID=HOST");
    std::vector<std::string> host;
    Status s = ParseHostList(e.substr(eq + 1), &host);
    if (!s.ok() || host.size() != 1)
      return Status::InvalidArgument("--map \"" + spec + "\": \"" + e + "\": bad host name");
    if (!pins->emplace(upid, host[0]).second)
      return Status::InvalidArgument("--map \"" + spec + "\": upid " + std::to_string(upid) + " is given twice");
  }
  return Status::OK();
}

Status PlaceTrees(const std::vector<PlaceProc>& procs, const std::vector<std::string>& hosts,
                  const std::map<uint64_t, std::string>& pins, std::vector<std::string>* out) {
  // Tree of each process = index of its root (parents are followed; a cycle cannot come from pids).
  std::vector<size_t> root(procs.size());
  for (size_t i = 0; i < procs.size(); i++) {
    size_t r = i;
    for (size_t guard = 0; procs[r].parent >= 0 && guard <= procs.size(); guard++) r = size_t(procs[r].parent);
    root[i] = r;
  }
  std::map<size_t, std::string> tree_host;  // root -> pinned host
  std::map<size_t, uint64_t> pinned_by;     // root -> the upid whose pin decided it
  for (const auto& [upid, host] : pins) {
    size_t i = 0;
    while (i < procs.size() && procs[i].upid != upid) i++;
    if (i == procs.size())
      return Status::InvalidArgument("--map: no process has upid " + std::to_string(upid) + " in this checkpoint");
    auto [it, fresh] = tree_host.emplace(root[i], host);
    if (!fresh && it->second != host)
      return Status::InvalidArgument(
          "--map puts upid " + std::to_string(pinned_by[root[i]]) + " on " + it->second + " and upid " +
          std::to_string(upid) + " on " + host + ", but they are one process tree (root upid " +
          std::to_string(procs[root[i]].upid) + "): a tree is rebuilt on one host, it cannot be split");
    if (fresh) pinned_by[root[i]] = upid;
  }
  out->assign(procs.size(), "");
  size_t k = 0;
  // Trees in the order of their first process (manifest order; a child may come before its parent).
  std::vector<size_t> order;
  std::vector<bool> seen(procs.size(), false);
  for (size_t i = 0; i < procs.size(); i++)
    if (!seen[root[i]]) {
      seen[root[i]] = true;
      order.push_back(root[i]);
    }
  std::map<size_t, std::string> chosen;
  for (size_t r : order) {
    auto it = tree_host.find(r);
    if (it != tree_host.end()) {
      chosen[r] = it->second;
      continue;
    }
    if (hosts.empty())
      return Status::InvalidArgument("the process tree of upid " + std::to_string(procs[r].upid) +
                                     " is not in --map and no --hosts/--hostfile was given for the others");
    chosen[r] = hosts[k++ % hosts.size()];
  }
  for (size_t i = 0; i < procs.size(); i++) (*out)[i] = chosen[root[i]];
  return Status::OK();
}

std::vector<std::string> UsedHosts(const std::vector<std::string>& placed) {
  std::vector<std::string> used;
  for (const auto& h : placed) {
    bool have = false;
    for (const auto& u : used) have = have || u == h;
    if (!have) used.push_back(h);
  }
  return used;
}

}  // namespace revive::launch
