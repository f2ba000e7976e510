// Typed helpers over the engine's SectionWriter/SectionReader, shared by every plugin. Fixed-width,
// native-endian (an image is restored on the machine type that wrote it); no allocation, so usable while
// user threads are suspended.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "inject/plugin.h"

namespace revive::plugins {

// Every section starts with a 4-byte tag so a section handed to the wrong plugin (or garbage) is refused
// with a clear message instead of being misparsed.
constexpr size_t kTagLen = 4;

class Out {
 public:
  explicit Out(inject::SectionWriter& w) : w_(w) {}
  bool tag(const char (&t)[kTagLen + 1]) { return ok_ = ok_ && w_.write(t, kTagLen); }
  bool u32(uint32_t v) { return bytes(&v, sizeof v); }
  bool i64(int64_t v) { return bytes(&v, sizeof v); }
  bool bytes(const void* p, size_t n) { return ok_ = ok_ && (n == 0 || w_.write(p, n)); }
  // Length-prefixed string (u32 length, no terminator).
  bool str(const char* s, size_t n) { return u32(static_cast<uint32_t>(n)) && bytes(s, n); }
  bool ok() const { return ok_; }

 private:
  inject::SectionWriter& w_;
  bool ok_ = true;
};

// Reader with a sticky failure flag: a plugin reads a whole record, then checks ok() once.
class In {
 public:
  explicit In(inject::SectionReader& r) : r_(r) {}
  bool tag(const char (&t)[kTagLen + 1]);
  uint32_t u32() { uint32_t v = 0; bytes(&v, sizeof v); return v; }
  int64_t i64() { int64_t v = 0; bytes(&v, sizeof v); return v; }
  bool bytes(void* p, size_t n) { return ok_ = ok_ && (n == 0 || r_.read(p, n)); }
  // Reads past n bytes.
  bool skip(size_t n) {
    char b[256];
    while (ok_ && n > 0) {
      size_t k = n < sizeof b ? n : sizeof b;
      bytes(b, k);
      n -= k;
    }
    return ok_;
  }
  // Reads a length-prefixed string into buf (nul-terminated). Fails if it does not fit in cap-1 bytes.
  bool str(char* buf, size_t cap);
  size_t remaining() const { return r_.remaining(); }
  bool ok() const { return ok_; }
  void fail() { ok_ = false; }

 private:
  inject::SectionReader& r_;
  bool ok_ = true;
};

}  // namespace revive::plugins
