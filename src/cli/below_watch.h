// `revive restart` watches the processes below the roots of a restored tree (docs/process-trees.md).
// A root's restorer is our child: when it ends badly before it is back, WaitEachServing sees it and the
// coordinator is told (cmd_restart.cpp TellEnded). A process below a root is its restored parent's child:
// if its restorer dies before the process is back (killed, a crash while reading its image: no report),
// nobody told the coordinator, and the processes already back waited at the restart barrier for ever.
// BelowWatch holds a pidfd of each (pidfds see any process's exit, not only a child's) and calls `ended`
// from its own thread when one exits; the coordinator decides by its state whether that matters (an
// exit after the process was back is the program's own business).
#pragma once

#include <sys/types.h>

#include <functional>
#include <thread>
#include <vector>

#include "plugins/proctree/tree.h"

namespace revive::cli {

class BelowWatch {
 public:
  // Members whose pidfd cannot be opened (already gone) are reported at once, from the thread.
  using Ended = std::function<void(const proctree::TreeMember&)>;
  BelowWatch(std::vector<proctree::TreeMember> members, Ended ended);
  ~BelowWatch();  // stops watching (and waits for an `ended` call in progress)
  BelowWatch(const BelowWatch&) = delete;
  BelowWatch& operator=(const BelowWatch&) = delete;

  // At most this many are watched (one descriptor each); the rest are not (said once on stderr).
  static constexpr size_t kMaxWatched = 4096;

 private:
  void Run();

  std::vector<proctree::TreeMember> members_;
  std::vector<int> fds_;  // pidfd of members_[k]; -1: gone when opened
  int stop_ = -1;         // eventfd: the destructor's wake-up
  Ended ended_;
  std::thread thread_;
};

}  // namespace revive::cli
