#include "plugins/common/fdinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "plugins/common/msg.h"

namespace revive::plugins {
namespace {

// Start of the value for key at the beginning of a line, or nullptr.
const char* find_key(const char* info, const char* key) {
  size_t n = strlen(key);
  for (const char* p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : nullptr) {
    if (strncmp(p, key, n) == 0 && p[n] == ':') {
      p += n + 1;
      while (*p == ' ' || *p == '\t') ++p;
      return p;
    }
  }
  return nullptr;
}

}  // namespace

bool fdinfo_load(int fd, char* buf, size_t cap) {
  char path[48];
  Msg(path, sizeof path).s("/proc/self/fdinfo/").i(fd);
  int f = open(path, O_RDONLY | O_CLOEXEC);
  if (f < 0) return false;
  size_t len = 0;
  while (len + 1 < cap) {
    ssize_t n = read(f, buf + len, cap - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  close(f);
  buf[len] = '\0';
  return len > 0;
}

const char* fdinfo_parse(const char* p, int base, uint64_t* out) {
  while (*p == ' ' || *p == '\t') ++p;
  uint64_t v = 0;
  const char* start = p;
  for (;; ++p) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (base == 16 && *p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else break;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  *out = v;
  return p == start ? nullptr : p;
}

bool fdinfo_num(const char* info, const char* key, int base, uint64_t* out) {
  const char* p = find_key(info, key);
  return p && fdinfo_parse(p, base, out);
}

bool fdinfo_pair(const char* info, const char* key, uint64_t* a, uint64_t* b) {
  const char* p = find_key(info, key);
  if (!p || *p != '(') return false;
  p = fdinfo_parse(p + 1, 10, a);
  if (!p || *p != ',') return false;
  ++p;
  while (*p == ' ') ++p;
  return fdinfo_parse(p, 10, b) != nullptr;
}

}  // namespace revive::plugins
