// Reading REVIVE_* environment variables with errors that name the variable (never a silent default
// for a value that is set but malformed).
#ifndef REVIVE_CORE_ENV_VARS_H_
#define REVIVE_CORE_ENV_VARS_H_

#include <cstdint>
#include <string>

#include "core/status.h"

namespace revive {

// Unset or empty leaves *out unchanged. "1/0/true/false/yes/no/on/off" (any case) for bools.
Status GetEnvBool(const char* name, bool* out);
Status GetEnvInt(const char* name, int64_t min, int64_t max, int64_t* out);
Status GetEnvString(const char* name, std::string* out);

}  // namespace revive

#endif  // REVIVE_CORE_ENV_VARS_H_
