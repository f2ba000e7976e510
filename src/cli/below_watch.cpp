// BelowWatch (below_watch.h): one thread polling the members' pidfds and a stop eventfd.
#include "cli/below_watch.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace revive::cli {

BelowWatch::BelowWatch(std::vector<proctree::TreeMember> members, Ended ended)
    : members_(std::move(members)), ended_(std::move(ended)) {
  if (members_.empty()) return;
  if (members_.size() > kMaxWatched) {
    fprintf(stderr, "revive restart: warning: %zu processes below the tree's roots; the first %zu are watched "
            "for a death before they are back, the others not\n", members_.size(), kMaxWatched);
    members_.resize(kMaxWatched);
  }
  for (const auto& m : members_) fds_.push_back(int(syscall(SYS_pidfd_open, m.pid, 0)));
  stop_ = eventfd(0, EFD_CLOEXEC);
  if (stop_ < 0) {
    fprintf(stderr, "revive restart: warning: eventfd: %s; the processes below the tree's roots are not "
            "watched\n", strerror(errno));
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    fds_.clear();
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

BelowWatch::~BelowWatch() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(stop_, &one, sizeof one);
    thread_.join();
  }
  for (int fd : fds_)
    if (fd >= 0) close(fd);
  if (stop_ >= 0) close(stop_);
}

void BelowWatch::Run() {
  // pidfd_open failed (ESRCH: it already exited and was reaped): ended before we could look.
  size_t left = 0;
  for (size_t k = 0; k < fds_.size(); ++k) {
    if (fds_[k] < 0)
      ended_(members_[k]);
    else
      ++left;
  }
  std::vector<struct pollfd> p(fds_.size() + 1);
  for (size_t k = 0; k < fds_.size(); ++k) p[k] = {fds_[k], POLLIN, 0};  // negative fds are skipped by poll
  p.back() = {stop_, POLLIN, 0};
  while (left > 0) {
    int n = poll(p.data(), p.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p.back().revents) return;
    for (size_t k = 0; k + 1 < p.size(); ++k) {
      if (p[k].fd < 0 || !p[k].revents) continue;
      p[k].fd = -1;  // one report per process
      --left;
      ended_(members_[k]);
    }
  }
}

}  // namespace revive::cli
