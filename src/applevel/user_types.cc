// Reader and the adapter that stores Checkpointable objects as one serialized blob per key.
#include "revive/checkpoint.hpp"

namespace revive {

void Reader::read_bytes(void* dst, size_t n) {
  if (n > n_) fail("wanted " + std::to_string(n) + " more bytes, " + std::to_string(n_) + " left");
  if (n == 0) return;  // dst may be null (empty vector): memcpy must not see it
  std::memcpy(dst, p_, n);
  p_ += n;
  n_ -= n;
}

void Reader::read(std::string& s) {
  uint64_t n = 0;
  read(n);
  if (n > n_) fail("string length " + std::to_string(n) + " exceeds the stored data");
  s.assign(p_, n);
  p_ += n;
  n_ -= n;
}

void Reader::fail(const std::string& why) const { throw Error(what_ + ": reading user type: " + why); }

namespace detail {

void CheckpointableItem::gather(std::vector<ByteSpan>& out, std::string& scratch) {
  size_t at = scratch.size();
  Writer w(&scratch);
  o_->write(w);
  // Each item gets its own scratch (Checkpoint::Impl), so it does not move after this.
  out.push_back({scratch.data() + at, scratch.size() - at});
}

void CheckpointableItem::load(uint64_t, const char* d, size_t s, const std::string& what) {
  Reader r(d, s, what);
  o_->read(r);
  if (r.remaining() != 0)
    throw Error(what + ": user type read " + std::to_string(s - r.remaining()) + " of " + std::to_string(s) +
                " stored bytes (write() and read() disagree)");
}

}  // namespace detail
}  // namespace revive
