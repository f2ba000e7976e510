#include "plugins/common/outside_files.h"

#include <stdint.h>
#include <stdlib.h>

namespace revive::plugins {
namespace {

struct Inode {
  uint64_t dev, ino;
};
constexpr int kMax = 16;  // revive launch lists no more (docs/plugins.md)
Inode g_outside[kMax];
int g_n;
bool g_read;

bool parse_u64(const char*& p, uint64_t* out) {
  if (*p < '0' || *p > '9') return false;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + uint64_t(*p - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool outside_files_init() {
  if (g_read) return true;
  g_read = true;
  const char* p = getenv("REVIVE_OUTSIDE_FILES");
  if (!p) return true;
  while (*p) {
    Inode in{};
    if (!parse_u64(p, &in.dev) || *p++ != ':' || !parse_u64(p, &in.ino) || (*p && *p != ',') || g_n == kMax) {
      g_n = 0;
      return false;
    }
    g_outside[g_n++] = in;
    if (*p == ',') ++p;
  }
  return true;
}

bool outside_file(dev_t dev, ino_t ino) {
  for (int k = 0; k < g_n; ++k)
    if (g_outside[k].dev == uint64_t(dev) && g_outside[k].ino == uint64_t(ino)) return true;
  return false;
}

}  // namespace revive::plugins
