#include "applevel/levels.h"

#include <cctype>

namespace revive::applevel {

Status LevelPolicy::Parse(const std::string& spec, LevelPolicy* out) {
  *out = LevelPolicy();
  if (spec.empty()) return Status::OK();
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("storage levels \"" + spec + "\": " + why +
                                   " (expected rules like \"L1+L3,L4@10\": levels L1-L4 joined by '+', an optional "
                                   "@N to apply a rule to every N-th version, rules separated by ',')");
  };
  bool every_version = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string rule = spec.substr(pos, comma - pos);
    pos = comma + 1;
    Rule r;
    size_t at = rule.find('@');
    std::string lv = rule.substr(0, at);
    if (at != std::string::npos) {
      std::string n = rule.substr(at + 1);
      if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos || std::stoul(n) == 0)
        return bad("'" + rule + "': @ needs a positive number");
      r.every = std::stoul(n);
    }
    size_t p = 0;
    while (p <= lv.size()) {
      size_t plus = lv.find('+', p);
      if (plus == std::string::npos) plus = lv.size();
      std::string l = lv.substr(p, plus - p);
      p = plus + 1;
      if (l.size() != 2 || std::toupper(static_cast<unsigned char>(l[0])) != 'L' || l[1] < '1' || l[1] > '4')
        return bad("'" + l + "' is not a level");
      r.levels |= 1u << (l[1] - '1');
    }
    if (r.levels & (kL2 | kL3)) r.levels |= kL1;  // partner copies and parity protect node-local pieces
    if (r.every == 1) every_version = true;
    out->rules.push_back(r);
  }
  if (!every_version) return bad("no rule applies to every version (add one without @N)");
  return Status::OK();
}

unsigned LevelPolicy::LevelsFor(uint64_t v) const {
  unsigned l = 0;
  for (const Rule& r : rules)
    if (v % r.every == 0) l |= r.levels;
  return l;
}

std::string LevelPolicy::Names(unsigned levels) {
  std::string s;
  for (int i = 0; i < 4; ++i)
    if (levels & (1u << i)) s += (s.empty() ? "L" : "+L") + std::to_string(i + 1);
  return s.empty() ? "none" : s;
}

}  // namespace revive::applevel
