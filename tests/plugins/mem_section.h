// Test stand-ins for the engine's mmap-backed section writer/reader: plain memory buffers.
#pragma once

#include <string.h>

#include <string>

#include "inject/plugin.h"

namespace revive::plugins::test {

class MemWriter final : public inject::SectionWriter {
 public:
  bool write(const void* data, size_t len) override {
    bytes.append(static_cast<const char*>(data), len);
    return true;
  }
  std::string bytes;
};

class MemReader final : public inject::SectionReader {
 public:
  explicit MemReader(std::string b) : bytes_(std::move(b)) {}
  bool read(void* data, size_t len) override {
    if (len > remaining()) return false;
    memcpy(data, bytes_.data() + pos_, len);
    pos_ += len;
    return true;
  }
  size_t remaining() const override { return bytes_.size() - pos_; }

 private:
  std::string bytes_;
  size_t pos_ = 0;
};

}  // namespace revive::plugins::test
