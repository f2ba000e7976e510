// Placement of whole process trees on hosts (`revive restart --hosts`): a tree (a root and its descendants)
// is restored by one `revive restart` on one host, which rebuilds it with the recorded pids, so a tree can
// never span hosts. Trees are the unit of the round robin; `--map UPID=HOST` pins a tree by any of its
// processes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::launch {

struct PlaceProc {
  uint64_t upid = 0;
  int parent = -1;  // index of the parent's entry; -1: a root
};

// "12=n1,14=n2" -> {12: n1, 14: n2}. Errors name the entry.
Status ParseMap(const std::string& spec, std::map<uint64_t, std::string>* pins);

// hosts: the round-robin list (slots already repeated); pins: upid -> host. The k-th unpinned tree
// (ordered by the position of its first process) goes to hosts[k mod n]. Errors: a pin naming no process,
// two pins splitting one tree, no host for an unpinned tree. *out: the host of every process (same order).
Status PlaceTrees(const std::vector<PlaceProc>& procs, const std::vector<std::string>& hosts,
                  const std::map<uint64_t, std::string>& pins, std::vector<std::string>* out);

// The distinct hosts of `placed` in order of first appearance.
std::vector<std::string> UsedHosts(const std::vector<std::string>& placed);

}  // namespace revive::launch
