#include "storage/catalog.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace revive::storage {
namespace {
std::string RankList(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t r : v) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}
const char* CodeName(int parity) { return parity == 1 ? "XOR" : "Reed-Solomon"; }
}  // namespace

std::string VersionPlan::Summary() const {
  std::string s = std::to_string(ranks) + (ranks == 1 ? " rank:" : " ranks:");
  std::string parts;
  auto add = [&](int n, const char* what) {
    if (n) parts += (parts.empty() ? " " : ", ") + std::to_string(n) + " " + what;
  };
  add(own, "read on their node");
  add(copies, "fetched from another node");
  add(rebuilt, "rebuilt from their group's parity");
  return s + parts;
}

void Catalog::Add(int holder, const PieceMeta& m) { held_.push_back({holder, m}); }

void Catalog::MarkBad(int holder, PieceMeta::Kind kind, uint32_t rank, uint64_t version) {
  bad_.insert({holder, static_cast<int>(kind), rank, version});
}

bool Catalog::IsBad(int holder, const PieceMeta& m) const {
  return bad_.count({holder, static_cast<int>(m.kind), m.rank, m.version}) != 0;
}

std::vector<uint64_t> Catalog::Versions() const {
  std::vector<uint64_t> v;
  for (const Held& h : held_) v.push_back(h.meta.version);
  std::sort(v.rbegin(), v.rend());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<PieceRef> Catalog::Pieces(uint64_t v) const {
  std::vector<PieceRef> out;
  for (const Held& h : held_)
    if (h.meta.version == v && !IsBad(h.holder, h.meta)) out.push_back({h.holder, &h.meta});
  return out;
}

bool Catalog::Plan(uint64_t v, uint32_t ranks, const std::vector<int>& home, VersionPlan* out,
                   std::string* why) const {
  *out = VersionPlan();
  std::vector<PieceRef> pieces = Pieces(v);
  // The pieces of one version agree on what the version is; one that does not (left from another run
  // with the same name and numbering) is ignored rather than trusted. What the version is is what most of
  // its data pieces say (ties: the first found), so a leftover that happens to be found first cannot make
  // every other piece look foreign.
  using Identity = std::tuple<int64_t, uint64_t, std::string, std::vector<std::string>>;
  std::map<Identity, int> votes;
  for (const PieceRef& p : pieces)
    if (p.meta->kind == PieceMeta::kData && p.meta->ranks == ranks)
      ++votes[{p.meta->iteration, p.meta->parent_version, p.meta->name, p.meta->keys}];
  const PieceMeta* ref = nullptr;
  int best = 0;
  for (const PieceRef& p : pieces)
    if (p.meta->kind == PieceMeta::kData && p.meta->ranks == ranks) {
      const int n = votes[{p.meta->iteration, p.meta->parent_version, p.meta->name, p.meta->keys}];
      if (n > best) best = n, ref = p.meta;
    }
  if (!ref) {
    for (const PieceRef& p : pieces)
      if (p.meta->ranks != ranks) {
        *why = "version " + std::to_string(v) + " was written by " + std::to_string(p.meta->ranks) +
               " ranks, this run has " + std::to_string(ranks);
        out->rank_mismatch = true;
        return false;
      }
    *why = "version " + std::to_string(v) + ": no rank's data is left on any node";
    return false;
  }
  auto agrees = [&](const PieceMeta& m) {
    return m.ranks == ref->ranks && m.iteration == ref->iteration && m.parent_version == ref->parent_version &&
           m.name == ref->name;
  };
  out->version = v;
  out->iteration = ref->iteration;
  out->parent_version = ref->parent_version;
  out->ranks = ranks;
  out->keys = ref->keys;
  out->layouts = ref->layouts;
  // Data and parity pieces per rank, usable ones only.
  std::vector<std::vector<PieceRef>> data(ranks), parity(ranks);
  for (const PieceRef& p : pieces) {
    if (!agrees(*p.meta)) continue;
    if (p.meta->kind == PieceMeta::kData) {
      if (p.meta->keys == ref->keys) data[p.meta->rank].push_back(p);
    } else {
      parity[p.meta->rank].push_back(p);
    }
  }
  auto pick = [&](const std::vector<PieceRef>& v, int at) -> PieceRef {
    for (const PieceRef& p : v)
      if (p.holder == at) return p;
    return v.empty() ? PieceRef{} : v.front();
  };
  out->sources.resize(ranks);
  std::string missing;
  for (uint32_t r = 0; r < ranks; ++r) {
    RankSource& src = out->sources[r];
    const int at = r < home.size() ? home[r] : -1;
    if (!data[r].empty()) {
      src.how = RankSource::kRead;
      src.data = pick(data[r], at);
      if (src.data.holder == at) ++out->own;
      else ++out->copies;
      continue;
    }
    // No copy: rebuild from a group that has r as a member (any member's parity piece describes it).
    const PieceMeta* group = nullptr;
    for (uint32_t q = 0; q < ranks && !group; ++q)
      for (const PieceRef& p : parity[q])
        if (p.meta->MemberIndex(r) >= 0) {
          group = p.meta;
          break;
        }
    if (!group) {
      missing += "rank " + std::to_string(r) + ": no copy of its data on any node and no parity group holds it; ";
      continue;
    }
    src.how = RankSource::kRebuild;
    src.group = group;
    src.index = group->MemberIndex(r);
    std::vector<uint32_t> lost;
    for (size_t i = 0; i < group->members.size(); ++i) {
      const uint32_t q = group->members[i];
      PieceRef d, p;
      // A member's piece counts only if it describes the same group and the same bytes.
      for (const PieceRef& c : data[q])
        if (c.meta->length == group->lengths[i] && c.meta->checksum == group->checksums[i]) {
          d = c.holder == at ? c : (d.ok() ? d : c);
        }
      for (const PieceRef& c : parity[q])
        if (c.meta->members == group->members && c.meta->lengths == group->lengths &&
            c.meta->checksums == group->checksums && c.meta->block == group->block &&
            c.meta->parity == group->parity) {
          p = c.holder == at ? c : (p.ok() ? p : c);
        }
      if (!d.ok() || !p.ok()) {
        lost.push_back(q);
        d = p = PieceRef{};
      }
      src.member_data.push_back(d);
      src.member_parity.push_back(p);
    }
    if (lost.size() > static_cast<size_t>(group->parity)) {
      missing += "rank " + std::to_string(r) + ": no copy of its data; its " + CodeName(group->parity) +
                 " group (ranks " + RankList(group->members) + ") lost " + std::to_string(lost.size()) +
                 " members (ranks " + RankList(lost) + "), parity tolerates " + std::to_string(group->parity) + "; ";
      continue;
    }
    ++out->rebuilt;
  }
  if (!missing.empty()) {
    missing.resize(missing.size() - 2);
    *why = "version " + std::to_string(v) + ": " + missing;
    return false;
  }
  return true;
}

}  // namespace revive::storage
