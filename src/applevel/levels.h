// Which storage levels a version goes to (Options::levels, REVIVE_LEVELS): "L1+L3,L4@10".
#ifndef REVIVE_APPLEVEL_LEVELS_H_
#define REVIVE_APPLEVEL_LEVELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::applevel {

enum Level : unsigned { kL1 = 1, kL2 = 2, kL3 = 4, kL4 = 8 };

struct LevelPolicy {
  struct Rule {
    unsigned levels = 0;
    uint64_t every = 1;
  };
  std::vector<Rule> rules;  // empty: L4 only (no multi-level storage)

  // InvalidArgument quoting the spec and the reason.
  static Status Parse(const std::string& spec, LevelPolicy* out);
  bool multilevel() const { return !rules.empty(); }
  // The levels version v goes to: the union of the rules whose N divides v.
  unsigned LevelsFor(uint64_t v) const;
  static std::string Names(unsigned levels);  // "L1+L3"
};

}  // namespace revive::applevel

#endif  // REVIVE_APPLEVEL_LEVELS_H_
