// The one-rank Comm: every collective is the identity.
#include "applevel/comm.h"

#include <cstring>
#include <stdexcept>

namespace revive::detail {

std::vector<std::string> Comm::allgather_string(const std::string& s) {
  if (size() != 1) throw std::logic_error("revive: this Comm has several ranks but no allgather_string");
  return {s};
}

// One rank: every message is to itself; the i-th send matches the i-th receive.
void Comm::exchange(const std::vector<SendBuf>& sends, const std::vector<RecvBuf>& recvs) {
  if (size() != 1 || sends.size() != recvs.size())
    throw std::logic_error("revive: this Comm has several ranks (or unmatched messages) but no exchange");
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].size != recvs[i].size) throw std::logic_error("revive: exchange: message sizes differ");
    if (sends[i].size) std::memcpy(recvs[i].data, sends[i].data, sends[i].size);
  }
}

namespace {
class SerialComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  uint64_t allreduce_min_u64(uint64_t v) override { return v; }
  bool allreduce_and(bool v) override { return v; }
  void bcast(void*, size_t, int) override {}
};
}  // namespace

std::shared_ptr<Comm> serial_comm() { return std::make_shared<SerialComm>(); }

}  // namespace revive::detail
