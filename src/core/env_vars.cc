#include "core/env_vars.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace revive {
namespace {
thread_local const std::map<std::string, std::string>* t_config = nullptr;
thread_local std::string t_config_path;

// The value of `name` and how to name it in an error.
const char* Lookup(const char* name, std::string* where) {
  const char* v = std::getenv(name);
  *where = std::string("environment variable ") + name;
  if (v && *v) return v;
  if (t_config) {
    auto it = t_config->find(name);
    if (it != t_config->end()) {
      *where = name + std::string(" in ") + t_config_path;
      return it->second.c_str();
    }
  }
  return v;
}
}  // namespace

Status ReadConfigFile(const std::string& path, std::map<std::string, std::string>* out) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return Status::IOError(path + ": cannot open configuration file: " + std::strerror(errno));
  char line[4096];
  int n = 0;
  Status s;
  while (s.ok() && std::fgets(line, sizeof line, f)) {
    ++n;
    std::string l(line);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r' || l.back() == ' ' || l.back() == '\t')) l.pop_back();
    size_t b = l.find_first_not_of(" \t");
    if (b == std::string::npos || l[b] == '#') continue;
    l = l.substr(b);
    size_t eq = l.find('=');
    std::string k = eq == std::string::npos ? l : l.substr(0, eq);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (eq == std::string::npos || k.compare(0, 7, "REVIVE_") != 0 || k.find_first_of(" \t") != std::string::npos)
      s = Status::InvalidArgument(path + ":" + std::to_string(n) + ": expected REVIVE_NAME=value, got \"" + l + "\"");
    else {
      std::string v = l.substr(eq + 1);
      size_t vb = v.find_first_not_of(" \t");
      (*out)[k] = vb == std::string::npos ? "" : v.substr(vb);
    }
  }
  std::fclose(f);
  return s;
}

ConfigScope::ConfigScope(const std::map<std::string, std::string>* vars, std::string path)
    : prev_vars_(t_config), prev_path_(std::move(t_config_path)) {
  t_config = vars;
  t_config_path = std::move(path);
}
ConfigScope::~ConfigScope() {
  t_config = prev_vars_;
  t_config_path = std::move(prev_path_);
}

Status GetEnvBool(const char* name, bool* out) {
  std::string where;
  const char* v = Lookup(name, &where);
  if (!v || !*v) return Status::OK();
  for (const char* t : {"1", "true", "yes", "on"})
    if (strcasecmp(v, t) == 0) return *out = true, Status::OK();
  for (const char* f : {"0", "false", "no", "off"})
    if (strcasecmp(v, f) == 0) return *out = false, Status::OK();
  return Status::InvalidArgument(where + "=\"" + v + "\": expected 0 or 1");
}

Status GetEnvInt(const char* name, int64_t min, int64_t max, int64_t* out) {
  std::string where;
  const char* v = Lookup(name, &where);
  if (!v || !*v) return Status::OK();
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < min || x > max)
    return Status::InvalidArgument(where + "=\"" + v + "\": expected an integer in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  *out = x;
  return Status::OK();
}

Status GetEnvDouble(const char* name, double min_exclusive, double max, double* out) {
  std::string where;
  const char* v = Lookup(name, &where);
  if (!v || !*v) return Status::OK();
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  // !(x > min) also rejects NaN; "inf" fails x <= max.
  if (errno != 0 || end == v || *end != '\0' || !(x > min_exclusive) || !(x <= max)) {
    char range[96];
    std::snprintf(range, sizeof range, "expected a number > %g and <= %g", min_exclusive, max);
    return Status::InvalidArgument(where + "=\"" + v + "\": " + range);
  }
  *out = x;
  return Status::OK();
}

Status GetEnvString(const char* name, std::string* out) {
  std::string where;
  const char* v = Lookup(name, &where);
  if (v && *v) *out = v;
  return Status::OK();
}

}  // namespace revive
