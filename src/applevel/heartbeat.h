// Heartbeat: a rank shows a supervisor (revive run) that it makes progress by touching
// <dir>/rank.<R>; a file older than the supervisor's hang timeout is a hung rank. The file's content names
// the rank, process, host and newest version; between versions only its mtime changes.
#ifndef REVIVE_APPLEVEL_HEARTBEAT_H_
#define REVIVE_APPLEVEL_HEARTBEAT_H_

#include <time.h>

#include <cstdint>
#include <string>

namespace revive::applevel {

class Heartbeat {
 public:
  // Creates <dir> (one level) and <dir>/rank.<rank>. On failure one warning naming the file on stderr, and
  // Beat()/Record() do nothing: a missing heartbeat must not stop the computation. `what` names the
  // checkpoint in the warning and the content.
  Heartbeat(const std::string& dir, int rank, std::string what);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Called at every update_and_write, so it costs a coarse clock read (vDSO, no syscall, whatever the
  // clocksource) and a compare; the file's mtime is set at most once per second.
  void Beat() {
    if (fd_ < 0) return;
    timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    const int64_t now = static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
    if (now - last_ns_ >= 1000000000) Touch(now);
  }
  // Rewrites the content after a version was written or read (once per checkpoint, not per beat).
  void Record(uint64_t version, int64_t iteration);

 private:
  void Touch(int64_t now_ns);
  int fd_ = -1;
  int rank_;
  int64_t last_ns_ = 0;
  std::string path_;
  std::string what_;
  bool warned_ = false;
};

}  // namespace revive::applevel

#endif  // REVIVE_APPLEVEL_HEARTBEAT_H_
