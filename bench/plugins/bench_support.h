// Shared by the plugin benches: in-memory SectionWriter/SectionReader (the engine's writer is mmap-backed)
// and a monotonic clock in seconds.
#pragma once

#include <string.h>
#include <time.h>

#include <string>

#include "inject/plugin.h"

struct BufWriter final : revive::inject::SectionWriter {
  std::string b;
  bool write(const void* p, size_t n) override {
    b.append(static_cast<const char*>(p), n);
    return true;
  }
};

struct BufReader final : revive::inject::SectionReader {
  const std::string& b;
  size_t pos = 0;
  explicit BufReader(const std::string& s) : b(s) {}
  bool read(void* p, size_t n) override {
    if (n > b.size() - pos) return false;
    memcpy(p, b.data() + pos, n);
    pos += n;
    return true;
  }
  size_t remaining() const override { return b.size() - pos; }
};

inline double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
