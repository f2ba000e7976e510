#include "coord/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

namespace revive::coord {

int LogLevel() {
  static int level = [] {
    const char* s = getenv("REVIVE_LOG");
    return (s != nullptr && *s >= '0' && *s <= '3' && s[1] == '\0') ? *s - '0' : 1;
  }();
  return level;
}

void Log(int level, const char* fmt, ...) {
  if (level > LogLevel()) return;
  char buf[1024];
  // A time stamp: the daemon's stderr is <ckpt-dir>/coordinator.log, read long after the fact.
  time_t now = time(nullptr);
  struct tm tm;
  char ts[32] = "";
  if (localtime_r(&now, &tm) != nullptr) strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S ", &tm);
  int n = snprintf(buf, sizeof buf, "%srevive-coord[%d]: ", ts, (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", buf);
}

}  // namespace revive::coord
