#include "core/env_vars.h"

#include <cerrno>
#include <cstdlib>
#include <strings.h>

namespace revive {

Status GetEnvBool(const char* name, bool* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return Status::OK();
  for (const char* t : {"1", "true", "yes", "on"})
    if (strcasecmp(v, t) == 0) return *out = true, Status::OK();
  for (const char* f : {"0", "false", "no", "off"})
    if (strcasecmp(v, f) == 0) return *out = false, Status::OK();
  return Status::InvalidArgument(std::string("environment variable ") + name + "=\"" + v +
                                 "\": expected 0 or 1");
}

Status GetEnvInt(const char* name, int64_t min, int64_t max, int64_t* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return Status::OK();
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < min || x > max)
    return Status::InvalidArgument(std::string("environment variable ") + name + "=\"" + v +
                                   "\": expected an integer in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  *out = x;
  return Status::OK();
}

Status GetEnvString(const char* name, std::string* out) {
  const char* v = std::getenv(name);
  if (v && *v) *out = v;
  return Status::OK();
}

}  // namespace revive
