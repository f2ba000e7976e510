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

}  // namespace

std::string EncodeManifest(const Manifest& m) {
  std::string s = m.layouts.empty() ? kFirstLine : kFirstLine2;
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
  m.layouts.Encode(&s);
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
    } else if (v2 && (k == "dist" || k == "replicated")) {
      if (!m->layouts.ParseLine(k, v)) return Status::Corruption(path + ": bad manifest line: " + line);
    }
    else return Status::Corruption(path + ": bad manifest line: " + line);
  }
  for (bool b : seen)
    if (!b) return Status::Corruption(path + ": manifest misses a required field");
  if (m->shared_file.empty() != m->ranges.empty() || (!m->ranges.empty() && m->ranges.size() != m->ranks))
    return Status::Corruption(path + ": manifest names " + std::to_string(m->ranges.size()) + " rank ranges for " +
                              std::to_string(m->ranks) + " ranks" + (m->shared_file.empty() ? " and no shared file" : ""));
  return m->layouts.Check(path, m->ranks, m->keys);
}

}  // namespace revive::storage
