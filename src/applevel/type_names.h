// Human-readable names of stored types, for mismatch errors.
#ifndef REVIVE_APPLEVEL_TYPE_NAMES_H_
#define REVIVE_APPLEVEL_TYPE_NAMES_H_

#include <cstdint>
#include <string>

namespace revive::applevel {
std::string TypeName(uint32_t tag, uint32_t elem_size);
}

#endif  // REVIVE_APPLEVEL_TYPE_NAMES_H_
