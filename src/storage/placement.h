// Placement of redundancy across failure domains (ftRMA's topology awareness, sections 5-7 of
// ../shared/papers/ftrma-fault-tolerance-rma.txt): a group survives m lost members, so no two members
// of a group may sit in one failure domain that can fail as a unit, and a partner copy must not sit in
// its owner's domain. Pure functions of their input: every rank computes the same answer locally.
//
// domains[r] is the failure-domain path of rank r, outermost first, '/'-separated, host last, e.g.
// "rack2/node17". depth says how many leading components define the domain that members must not share
// (1 = the rack in the example); 0 or a depth >= the path's length means the whole path (the host).
#ifndef REVIVE_STORAGE_PLACEMENT_H_
#define REVIVE_STORAGE_PLACEMENT_H_

#include <string>
#include <vector>

#include "core/status.h"

namespace revive::storage {

// The domain of `path` at `depth` (its first depth components, or the whole path).
std::string DomainAt(const std::string& path, int depth);

// Redundancy groups of target size g (a job of fewer than g ranks forms one group of them all): every
// rank in exactly one group, no two members of a group in one domain, every group at least min_size
// members (m + 1 for m parity). Groups are as many as the largest domain needs (at least ceil(n / g)),
// their sizes differ by at most one, members ascending, groups ordered by their first member.
// Deterministic. InvalidArgument when impossible: fewer domains than the group size, or a domain so
// large that its ranks, one per group, leave groups smaller than min_size.
Status FormGroups(const std::vector<std::string>& domains, int depth, int g, int min_size,
                  std::vector<std::vector<int>>* groups);

// partner[r]: the rank that keeps rank r's full copy (L2), always in another domain. A ring over the
// ranks ordered domain by domain, shifted by the largest domain's size, so each rank receives exactly one
// copy; when one domain holds more than half of the ranks that is impossible, and the ranks outside it
// receive the surplus. InvalidArgument when all ranks share one domain.
Status Partners(const std::vector<std::string>& domains, int depth, std::vector<int>* partner);

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_PLACEMENT_H_
