// Ranks simulated by threads of one process, for the collective logic through detail::Comm (the MPI flavour
// only swaps the Comm).
#ifndef REVIVE_TESTS_APPLEVEL_THREAD_COMM_H_
#define REVIVE_TESTS_APPLEVEL_THREAD_COMM_H_

#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "revive/checkpoint.hpp"

namespace revive::testing {

// N ranks = N threads sharing this object; each collective is a barrier-separated exchange.
class ThreadWorld {
 public:
  explicit ThreadWorld(int n) : n_(n), slots_(n), bar_(n) {}
  int size() const { return n_; }
  // Every rank deposits `mine`; returns all deposits in rank order.
  std::vector<std::string> Exchange(int rank, std::string mine) {
    slots_[rank] = std::move(mine);
    bar_.arrive_and_wait();
    std::vector<std::string> all = slots_;
    bar_.arrive_and_wait();
    return all;
  }

 private:
  int n_;
  std::vector<std::string> slots_;
  std::barrier<> bar_;
};

class ThreadComm : public detail::Comm {
 public:
  ThreadComm(ThreadWorld* w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_->size(); }
  void barrier() override { w_->Exchange(rank_, ""); }
  uint64_t allreduce_min_u64(uint64_t v) override {
    uint64_t m = v;
    for (const auto& s : w_->Exchange(rank_, std::to_string(v))) m = std::min<uint64_t>(m, std::stoull(s));
    return m;
  }
  bool allreduce_and(bool v) override {
    bool r = true;
    for (const auto& s : w_->Exchange(rank_, v ? "1" : "0")) r = r && s == "1";
    return r;
  }
  void bcast(void* buf, size_t n, int root) override {
    auto all = w_->Exchange(rank_, std::string(static_cast<const char*>(buf), n));
    std::memcpy(buf, all[root].data(), n);
  }
  std::vector<std::string> allgather_string(const std::string& s) override { return w_->Exchange(rank_, s); }

 private:
  ThreadWorld* w_;
  int rank_;
};

// Runs f(rank, comm) on n threads; returns each rank's error message ("" = none).
inline std::vector<std::string> RunRanks(int n, const std::function<void(int, std::shared_ptr<detail::Comm>)>& f) {
  ThreadWorld world(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r, std::make_shared<ThreadComm>(&world, r));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace revive::testing

#endif  // REVIVE_TESTS_APPLEVEL_THREAD_COMM_H_
