// Building error and warning messages without snprintf/malloc (restore runs with user threads held and
// libc in its checkpointed state: stdio and locale are off limits, plain string copying is not).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::plugins {

class Msg {
 public:
  Msg(char* buf, size_t cap) : buf_(buf), cap_(cap) { if (cap_) buf_[0] = '\0'; }
  Msg& s(const char* text);
  Msg& i(int64_t v);
  Msg& u(uint64_t v);
  Msg& err(int errnum);  // "No such file or directory" (strerrordesc_np: no locale, no allocation)
  const char* c_str() const { return cap_ ? buf_ : ""; }
  size_t size() const { return len_; }

 private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
};

// Writes "revive: <text>\n" to fd 2 with write(2). Used for warnings of documented policies.
void warn(const char* text);

// Restore helper: formats "<text>" into msg, returns -errnum (or -EINVAL when errnum is 0).
int fail(char* msg, size_t cap, const Msg& text, int errnum);

}  // namespace revive::plugins
