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

#include "core/checksum.h"
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
// The text formats end with "checksum=<XXH3-64 of everything before, 16 hex>\n". Seal appends that line;
// CheckSeal verifies it and sets *body_end to where it starts. `noun` prefixes the reason ("manifest ").
inline void Seal(std::string* t) { *t += "checksum=" + Hex(Checksum64(t->data(), t->size())) + "\n"; }
inline Status CheckSeal(const std::string& what, const std::string& noun, const std::string& t, size_t* body_end) {
  size_t cpos = t.rfind("checksum=");
  if (cpos == std::string::npos || cpos == 0 || t[cpos - 1] != '\n' || t.size() != cpos + 9 + 16 + 1 ||
      t.back() != '\n')
    return Status::Corruption(what + ": " + noun + "truncated (no checksum line)");
  if (t.compare(cpos + 9, 16, Hex(Checksum64(t.data(), cpos))) != 0)
    return Status::Corruption(what + ": " + noun + "checksum mismatch");
  *body_end = cpos;
  return Status::OK();
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
