// Small text helpers shared by the storage's text formats (MANIFEST, piece descriptions) and its directory
// listings: one spelling of a hex checksum, a decimal number and a version directory name.
#ifndef REVIVE_STORAGE_TEXT_FIELDS_H_
#define REVIVE_STORAGE_TEXT_FIELDS_H_

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/env.h"

namespace revive::storage {

inline std::string Hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}
inline bool ParseU64(const std::string& s, uint64_t* v) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  *v = std::strtoull(s.c_str(), nullptr, 10);
  return errno == 0;
}
// "v-<N>", N > 0 without leading zeros.
inline bool ParseVersionDir(const std::string& n, uint64_t* v) {
  if (n.size() < 3 || n.size() > 22 || n.compare(0, 2, "v-") != 0) return false;
  if (n.find_first_not_of("0123456789", 2) != std::string::npos || n[2] == '0') return false;
  return ParseU64(n.substr(2), v);
}
// The numbers of the v-<N> directories in dir, ascending (none if dir does not exist).
inline Status ListVersionNumbers(Env* env, const std::string& dir, std::vector<uint64_t>* out) {
  out->clear();
  std::vector<std::string> names;
  Status s = env->GetChildren(dir, &names);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return s;
  for (const auto& n : names) {
    uint64_t v;
    if (ParseVersionDir(n, &v)) out->push_back(v);
  }
  std::sort(out->begin(), out->end());
  return Status::OK();
}

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_TEXT_FIELDS_H_
