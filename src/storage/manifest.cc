#include "storage/manifest.h"

#include "core/checksum.h"
#include "storage/text_fields.h"


#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace revive::storage {
namespace {
constexpr char kFirstLine[] = "revive-manifest 1\n";
constexpr char kFirstLine2[] = "revive-manifest 2\n";  // with dist=/replicated= lines

// "<key> <global_n> <unit> <o>:<c> ..." into *d (the block count is checked against ranks by the caller).
bool ParseDist(const std::string& v, Distribution* d) {
  std::vector<std::string> f;
  for (size_t pos = 0; pos <= v.size();) {
    size_t sp = v.find(' ', pos);
    if (sp == std::string::npos) sp = v.size();
    f.push_back(v.substr(pos, sp - pos));
    pos = sp + 1;
  }
  if (f.size() < 3 || f[0].empty() || !ParseU64(f[1], &d->global_n) || !ParseU64(f[2], &d->unit)) return false;
  d->key = f[0];
  for (size_t i = 3; i < f.size(); ++i) {
    size_t c = f[i].find(':');
    Block b;
    if (c == std::string::npos || !ParseU64(f[i].substr(0, c), &b.offset) || !ParseU64(f[i].substr(c + 1), &b.count))
      return false;
    d->blocks.push_back(b);
  }
  return true;
}

}  // namespace

const Distribution* Manifest::FindDistribution(const std::string& key) const {
  for (const auto& d : distributed)
    if (d.key == key) return &d;
  return nullptr;
}
bool Manifest::IsReplicated(const std::string& key) const {
  for (const auto& k : replicated)
    if (k == key) return true;
  return false;
}

std::string EncodeManifest(const Manifest& m) {
  std::string s = m.distributed.empty() && m.replicated.empty() ? kFirstLine : kFirstLine2;
  s += "name=" + m.name + "\n";
  s += "version=" + std::to_string(m.version) + "\n";
  s += "iteration=" + std::to_string(m.iteration) + "\n";
  s += "parent_version=" + std::to_string(m.parent_version) + "\n";
  s += "ranks=" + std::to_string(m.ranks) + "\n";
  for (const auto& k : m.keys) s += "key=" + k + "\n";
  if (!m.shared_file.empty()) {
    s += "shared=" + m.shared_file + "\n";
    for (const auto& r : m.ranges)
      s += "range=" + std::to_string(r.offset) + " " + std::to_string(r.length) + " " + Hex(r.checksum) + "\n";
  }
  for (const auto& d : m.distributed) {
    s += "dist=" + d.key + " " + std::to_string(d.global_n) + " " + std::to_string(d.unit);
    for (const auto& b : d.blocks) s += " " + std::to_string(b.offset) + ":" + std::to_string(b.count);
    s += "\n";
  }
  for (const auto& k : m.replicated) s += "replicated=" + k + "\n";
  Seal(&s);
  return s;
}

Status DecodeManifest(const std::string& path, const std::string& t, Manifest* m) {
  if (t.empty()) return Status::Corruption(path + ": manifest is empty");
  const bool v2 = t.compare(0, sizeof kFirstLine2 - 1, kFirstLine2) == 0;
  if (!v2 && t.compare(0, sizeof kFirstLine - 1, kFirstLine) != 0) {
    if (t.compare(0, 16, "revive-manifest ") == 0)
      return Status::Corruption(path + ": manifest format is not supported (this build reads versions 1 and 2)");
    return Status::Corruption(path + ": not a revive manifest");
  }
  size_t cpos = 0;
  Status sealed = CheckSeal(path, "manifest ", t, &cpos);
  if (!sealed.ok()) return sealed;
  *m = Manifest();
  bool seen[5] = {};
  size_t pos = sizeof kFirstLine - 1;
  while (pos < cpos) {
    size_t nl = t.find('\n', pos);
    std::string line = t.substr(pos, nl - pos);
    pos = nl + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::Corruption(path + ": manifest line without '=': " + line);
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    uint64_t u = 0;
    bool num_ok = ParseU64(v, &u);
    if (k == "name") m->name = v, seen[0] = true;
    else if (k == "version" && num_ok) m->version = u, seen[1] = true;
    else if (k == "iteration") {
      bool neg = !v.empty() && v[0] == '-';
      if (!ParseU64(neg ? v.substr(1) : v, &u)) return Status::Corruption(path + ": bad iteration " + v);
      m->iteration = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
      seen[2] = true;
    } else if (k == "parent_version" && num_ok) m->parent_version = u, seen[3] = true;
    else if (k == "ranks" && num_ok && u >= 1 && u <= UINT32_MAX) m->ranks = static_cast<uint32_t>(u), seen[4] = true;
    else if (k == "key") m->keys.push_back(v);
    else if (k == "shared" && !v.empty() && v.find('/') == std::string::npos) m->shared_file = v;
    else if (k == "range") {
      RankRange r;
      size_t a = v.find(' '), b = a == std::string::npos ? a : v.find(' ', a + 1);
      std::string hex = b == std::string::npos ? "" : v.substr(b + 1);
      if (b == std::string::npos || !ParseU64(v.substr(0, a), &r.offset) ||
          !ParseU64(v.substr(a + 1, b - a - 1), &r.length) || hex.size() != 16 ||
          hex.find_first_not_of("0123456789abcdef") != std::string::npos ||
          r.offset + r.length < r.offset)
        return Status::Corruption(path + ": bad manifest line: " + line);
      r.checksum = std::strtoull(hex.c_str(), nullptr, 16);
      m->ranges.push_back(r);
    } else if (k == "dist" && v2) {
      Distribution d;
      if (!ParseDist(v, &d)) return Status::Corruption(path + ": bad manifest line: " + line);
      m->distributed.push_back(std::move(d));
    } else if (k == "replicated" && v2 && !v.empty()) {
      m->replicated.push_back(v);
    }
    else return Status::Corruption(path + ": bad manifest line: " + line);
  }
  for (bool b : seen)
    if (!b) return Status::Corruption(path + ": manifest misses a required field");
  if (m->shared_file.empty() != m->ranges.empty() || (!m->ranges.empty() && m->ranges.size() != m->ranks))
    return Status::Corruption(path + ": manifest names " + std::to_string(m->ranges.size()) + " rank ranges for " +
                              std::to_string(m->ranks) + " ranks" + (m->shared_file.empty() ? " and no shared file" : ""));
  // A restart with another number of ranks trusts these layouts to find its bytes: check them here.
  for (const auto& d : m->distributed) {
    if (std::find(m->keys.begin(), m->keys.end(), d.key) == m->keys.end() || m->FindDistribution(d.key) != &d)
      return Status::Corruption(path + ": dist= line for key '" + d.key + "' that is not a key, or twice");
    if (d.blocks.size() != m->ranks)
      return Status::Corruption(path + ": key '" + d.key + "' has " + std::to_string(d.blocks.size()) +
                                " blocks for " + std::to_string(m->ranks) + " ranks");
    Status ts = CheckTiling(d);
    if (!ts.ok()) return Status::Corruption(path + ": " + ts.message());
  }
  for (const auto& k : m->replicated)
    if (std::find(m->keys.begin(), m->keys.end(), k) == m->keys.end() || m->FindDistribution(k))
      return Status::Corruption(path + ": replicated= line for key '" + k + "' that is not a key, or distributed");
  return Status::OK();
}

}  // namespace revive::storage
