#include "rma/placement.h"

#include <algorithm>

#include "storage/placement.h"

namespace revive::rma {

Placement PlaceGroups(const std::vector<std::string>& domains, int size, int level) {
  Placement p;
  const int n = static_cast<int>(domains.size());
  p.group_of.assign(n, -1);
  if (n < 2) {
    p.warning = "fewer than 2 ranks: no checksum group can be formed";
    return p;
  }
  size = std::clamp(size, 2, n);
  Status st;
  if (level >= 0) {
    st = storage::FormGroups(domains, level == 0 ? 0 : 1, size, 2, &p.groups);
    if (!st.ok()) p.warning = st.ToString() + "; ";
  }
  if (level < 0 || !st.ok()) {
    // By rank order: the rule is off or cannot be met. Groups of `size`, the remainder spread over them.
    p.groups.assign(std::max(1, n / size), {});
    for (int r = 0; r < n; ++r) p.groups[r % p.groups.size()].push_back(r);
    if (level >= 0)
      p.warning += "checksum groups formed by rank order: the loss of one failure domain that holds two "
                   "members of a group is recovered from the last coordinated checkpoint only";
  }
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (int r : p.groups[g]) p.group_of[r] = static_cast<int>(g);
  return p;
}

}  // namespace revive::rma
