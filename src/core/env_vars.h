// Reading REVIVE_* environment variables with errors that name the variable (never a silent default
// for a value that is set but malformed).
#ifndef REVIVE_CORE_ENV_VARS_H_
#define REVIVE_CORE_ENV_VARS_H_

#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"

namespace revive {

// Unset or empty leaves *out unchanged. "1/0/true/false/yes/no/on/off" (any case) for bools.
Status GetEnvBool(const char* name, bool* out);
Status GetEnvInt(const char* name, int64_t min, int64_t max, int64_t* out);
// A finite decimal number in (min, max] (a duration in seconds, say: 0 itself is excluded by min = 0).
Status GetEnvDouble(const char* name, double min_exclusive, double max, double* out);
Status GetEnvString(const char* name, std::string* out);

// A configuration file of the same variables (REVIVE_CONFIG): "NAME=value" lines, '#' comments, blank lines.
// While a ConfigScope lives, the Get* functions on this thread fall back to the file's values for variables
// the environment does not set (the environment wins), and their errors name the file.
Status ReadConfigFile(const std::string& path, std::map<std::string, std::string>* out);
class ConfigScope {
 public:
  ConfigScope(const std::map<std::string, std::string>* vars, std::string path);
  ~ConfigScope();
  ConfigScope(const ConfigScope&) = delete;
  ConfigScope& operator=(const ConfigScope&) = delete;

 private:
  const std::map<std::string, std::string>* prev_vars_;
  std::string prev_path_;
};

}  // namespace revive

#endif  // REVIVE_CORE_ENV_VARS_H_
