// Checksum groups of the RMA library placed over failure domains (ftRMA section 5, "topology-aware"):
// storage::FormGroups does the placement (the multi-level storage uses the same rule); this adds what a
// running MPI job needs on top: a group for every rank even when the rule cannot be met (all ranks on one
// host, as in a test on one machine), with a warning that names the domain that holds two members.
#pragma once

#include <string>
#include <vector>

namespace revive::rma {

struct Placement {
  std::vector<std::vector<int>> groups;  // ranks, ascending within a group
  std::vector<int> group_of;             // rank -> group index
  std::string warning;                   // empty, or why a failure domain's loss would lose two members
};

// domains[r]: rank r's failure-domain path, outermost first, host last ("rack2/node17"). level: 0 = no
// two members of a group on one host, 1 = not in one rack (the path's first component), -1 = ignore
// domains. Groups of about `size` members, never fewer than 2.
Placement PlaceGroups(const std::vector<std::string>& domains, int size, int level);

}  // namespace revive::rma
