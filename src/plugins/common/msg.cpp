#include "plugins/common/msg.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

namespace revive::inject {
void stderr_line(const char* s, size_t n) __attribute__((weak));  // the engine's; null in revive-restart
}

namespace revive::plugins {

Msg& Msg::s(const char* text) {
  if (!text) text = "(null)";
  while (*text && len_ + 1 < cap_) buf_[len_++] = *text++;
  if (cap_) buf_[len_] = '\0';
  return *this;
}

Msg& Msg::u(uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  char out[24];
  for (size_t k = 0; k < n; ++k) out[k] = tmp[n - 1 - k];
  out[n] = '\0';
  return s(out);
}

Msg& Msg::i(int64_t v) {
  if (v < 0) {
    s("-");
    return u(static_cast<uint64_t>(-(v + 1)) + 1);  // no overflow on INT64_MIN
  }
  return u(static_cast<uint64_t>(v));
}

Msg& Msg::err(int errnum) {
  const char* d = strerrordesc_np(errnum);
  if (d) return s(d);
  return s("errno ").i(errnum);
}

void warn(const char* text) {
  char line[512];
  Msg m(line, sizeof line);
  m.s("revive: ").s(text).s("\n");
  // Inside the engine, a line written during a checkpoint waits for the resume (src/inject/stderr_defer.cpp).
  if (inject::stderr_line) {
    inject::stderr_line(line, m.size());
    return;
  }
  ssize_t off = 0, n = static_cast<ssize_t>(m.size());
  while (off < n) {
    ssize_t w = write(2, line + off, static_cast<size_t>(n - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += w;
  }
}

int fail(char* msg, size_t cap, const Msg& text, int errnum) {
  Msg(msg, cap).s(text.c_str());
  return errnum > 0 ? -errnum : -EINVAL;
}

}  // namespace revive::plugins
