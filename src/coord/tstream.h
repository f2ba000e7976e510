// Pieces shared by the streamed L3 exchanges of transparent images (tencode.h: the distributed encode,
// trebuild.h: the distributed rebuild): a member's data read by offset, an incremental XXH3, an owned
// descriptor. Blocks travel and are coded in pieces of kTChunk bytes, so the memory of either exchange is a
// few pieces whatever the images' sizes.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xxhash.h>

#include "coord/tlx.h"
#include "core/status.h"

namespace revive::coord {

constexpr size_t kTChunk = 1 << 20;  // a multiple of 64

struct TFd {
  int fd = -1;
  explicit TFd(int f = -1) : fd(f) {}
  TFd(const TFd&) = delete;
  TFd& operator=(const TFd&) = delete;
  ~TFd() {
    if (fd >= 0) close(fd);
  }
};

struct THash {
  XXH3_state_t* s = XXH3_createState();
  THash() { XXH3_64bits_reset(s); }
  THash(const THash&) = delete;
  THash& operator=(const THash&) = delete;
  ~THash() { XXH3_freeState(s); }
  void Add(const void* p, size_t n) { XXH3_64bits_update(s, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(s); }
};

std::string TBase(const std::string& p);

// A member's data: its files concatenated in name order (as TEncodeGroup orders them), read by offset with
// pread, so threads share the descriptors.
class TMemberData {
 public:
  // files gets each file's name, size and xxh3[i] (the caller's checksum, not computed here).
  Status Open(const std::vector<std::string>& paths, const std::vector<uint64_t>& xxh3, std::vector<TlxFile>* files);
  uint64_t size() const { return size_; }
  Status Read(uint64_t off, size_t n, char* out) const;

 private:
  std::vector<std::unique_ptr<TFd>> fds_;
  std::vector<std::string> paths_;
  std::vector<uint64_t> start_;
  uint64_t size_ = 0;
};

// "OK" from the peer, else its answer as the error.
Status TReadAck(int fd, const std::string& who);

}  // namespace revive::coord
