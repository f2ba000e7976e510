#include "storage/placement.h"

#include <algorithm>
#include <map>

namespace revive::storage {
namespace {

// The ranks' domains at one depth: the ranks ordered domain by domain (domains by name, ranks
// ascending within), which both placements deal from.
struct Domains {
  std::vector<int> order;            // ranks, domain by domain
  std::map<std::string, int> count;  // ranks per domain
  std::string largest;               // the domain with most ranks (first by name on a tie)
  int max_count = 0;
  std::string level;                 // "host" or "depth N", for messages
};

Status Classify(const std::vector<std::string>& paths, int depth, Domains* d) {
  std::vector<std::pair<std::string, int>> keyed;
  bool whole = depth <= 0;
  for (size_t r = 0; r < paths.size(); ++r) {
    if (paths[r].empty())
      return Status::InvalidArgument("rank " + std::to_string(r) + " has an empty failure-domain path");
    keyed.emplace_back(DomainAt(paths[r], depth), static_cast<int>(r));
    if (keyed.back().first == paths[r]) whole = true;
  }
  std::sort(keyed.begin(), keyed.end());
  for (const auto& [key, r] : keyed) {
    d->order.push_back(r);
    const int c = ++d->count[key];
    if (c > d->max_count || (c == d->max_count && key < d->largest)) {
      d->max_count = c;
      d->largest = key;
    }
  }
  d->level = whole ? "host" : "depth " + std::to_string(depth);
  return Status::OK();
}

std::string Names(const std::map<std::string, int>& count) {
  std::string out;
  int shown = 0;
  for (const auto& [name, c] : count) {
    if (shown++ == 8) return out + ", ...";
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

}  // namespace

std::string DomainAt(const std::string& path, int depth) {
  if (depth <= 0) return path;
  size_t end = 0, from = 0;
  for (int i = 0; i < depth; ++i, from = end + 1) {
    end = path.find('/', from);
    if (end == std::string::npos) return path;
  }
  return path.substr(0, end);
}

Status FormGroups(const std::vector<std::string>& domains, int depth, int g, int min_size,
                  std::vector<std::vector<int>>* groups) {
  groups->clear();
  if (g < 1 || min_size < 1 || min_size > g)
    return Status::InvalidArgument("redundancy groups of size " + std::to_string(g) + " with at least " +
                                   std::to_string(min_size) + " members: need 1 <= min size <= size");
  const int n = static_cast<int>(domains.size());
  if (n == 0) return Status::OK();
  Domains d;
  Status s = Classify(domains, depth, &d);
  if (!s.ok()) return s;
  if (n < min_size)
    return Status::InvalidArgument(std::to_string(n) + " ranks cannot form a redundancy group of at least " +
                                   std::to_string(min_size) + " members");
  const int size = std::min(g, n);  // a job smaller than g forms one group
  const int nd = static_cast<int>(d.count.size());
  if (nd < size)
    return Status::InvalidArgument("group size " + std::to_string(size) + " needs " + std::to_string(size) +
                                   " distinct failure domains (" + d.level + "); the " + std::to_string(n) +
                                   " ranks span only " + std::to_string(nd) + ": " + Names(d.count));
  // Dealing the ranks domain by domain round-robin into G groups puts a domain's ranks into distinct
  // groups as long as none has more than G, and balances the sizes. G groups of at most `size` members,
  // unless that leaves groups below min_size: then fewer, larger groups (as SCR merges a short last set).
  int ng = std::max((n + size - 1) / size, d.max_count);
  if (n / ng < min_size) ng = std::max(d.max_count, n / min_size);
  if (n / ng < min_size)
    return Status::InvalidArgument("failure domain " + d.largest + " (" + d.level + ") holds " +
                                   std::to_string(d.max_count) + " of the " + std::to_string(n) +
                                   " ranks and so needs " + std::to_string(d.max_count) +
                                   " groups, one for each; groups of at least " + std::to_string(min_size) +
                                   " members need " + std::to_string(d.max_count * min_size) + " ranks");
  groups->assign(ng, {});
  for (int q = 0; q < n; ++q) (*groups)[q % ng].push_back(d.order[q]);
  for (auto& grp : *groups) std::sort(grp.begin(), grp.end());
  std::sort(groups->begin(), groups->end());
  return Status::OK();
}

Status Partners(const std::vector<std::string>& domains, int depth, std::vector<int>* partner) {
  partner->clear();
  const int n = static_cast<int>(domains.size());
  if (n == 0) return Status::OK();
  Domains d;
  Status s = Classify(domains, depth, &d);
  if (!s.ok()) return s;
  if (d.count.size() == 1)
    return Status::InvalidArgument("all " + std::to_string(n) + " ranks share one failure domain (" + d.level +
                                   ": " + d.largest + "); a partner copy needs another domain");
  partner->assign(n, -1);
  if (2 * d.max_count <= n) {
    // Shifting by the largest domain's size never lands in the same domain, going either way round.
    for (int q = 0; q < n; ++q) (*partner)[d.order[q]] = d.order[(q + d.max_count) % n];
    return Status::OK();
  }
  // One domain holds more than half: its ranks send to the others in turn, which send back to distinct
  // ranks of it.
  std::vector<int> big, rest;
  for (int r : d.order) (DomainAt(domains[r], depth) == d.largest ? big : rest).push_back(r);
  for (size_t i = 0; i < big.size(); ++i) (*partner)[big[i]] = rest[i % rest.size()];
  for (size_t i = 0; i < rest.size(); ++i) (*partner)[rest[i]] = big[i];
  return Status::OK();
}

}  // namespace revive::storage
