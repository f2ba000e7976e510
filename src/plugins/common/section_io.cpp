#include "plugins/common/section_io.h"

#include <string.h>

namespace revive::plugins {

bool In::tag(const char (&t)[kTagLen + 1]) {
  char got[kTagLen];
  if (!bytes(got, kTagLen)) return false;
  if (memcmp(got, t, kTagLen) != 0) ok_ = false;
  return ok_;
}

bool In::str(char* buf, size_t cap) {
  uint32_t n = u32();
  if (!ok_ || cap == 0 || n >= cap || n > remaining()) return ok_ = false;
  if (!bytes(buf, n)) return false;
  buf[n] = '\0';
  return true;
}

}  // namespace revive::plugins
