// Heartbeat files for a supervisor: see heartbeat.h and docs/applevel.md ("Heartbeat").
#include "applevel/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace revive::applevel {

Heartbeat::Heartbeat(const std::string& dir, int rank, std::string what)
    : rank_(rank), path_(dir + "/rank." + std::to_string(rank)), what_(std::move(what)) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    warned_ = true;
    std::fprintf(stderr, "revive: %s: warning: no heartbeat (REVIVE_HEARTBEAT_DIR): cannot create %s: %s\n",
                 what_.c_str(), dir.c_str(), std::strerror(errno));
    return;
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    warned_ = true;
    std::fprintf(stderr, "revive: %s: warning: no heartbeat (REVIVE_HEARTBEAT_DIR): cannot create %s: %s\n",
                 what_.c_str(), path_.c_str(), std::strerror(errno));
    return;
  }
  Record(0, 0);
}

Heartbeat::~Heartbeat() {
  if (fd_ >= 0) ::close(fd_);
}

void Heartbeat::Record(uint64_t version, int64_t iteration) {
  if (fd_ < 0) return;
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  char buf[1024];
  const int n = std::snprintf(buf, sizeof buf, "rank %d\npid %ld\nhost %s\ncheckpoint %s\nversion %llu\niteration %lld\n",
                              rank_, static_cast<long>(::getpid()), host, what_.c_str(),
                              static_cast<unsigned long long>(version), static_cast<long long>(iteration));
  const size_t len = n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof buf - 1);
  // Not fsynced: the supervisor reads it on this node while we run; after a crash it is only a hint.
  if (::pwrite(fd_, buf, len, 0) != static_cast<ssize_t>(len) || ::ftruncate(fd_, static_cast<off_t>(len)) != 0) {
    if (!warned_)
      std::fprintf(stderr, "revive: %s: warning: cannot write heartbeat file %s: %s\n", what_.c_str(), path_.c_str(),
                   std::strerror(errno));
    warned_ = true;
  }
  // The write set the mtime; count it as a beat.
  timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  last_ns_ = static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

void Heartbeat::Touch(int64_t now_ns) {
  last_ns_ = now_ns;
  if (::futimens(fd_, nullptr) != 0 && !warned_) {
    warned_ = true;
    std::fprintf(stderr, "revive: %s: warning: cannot update heartbeat file %s: %s\n", what_.c_str(), path_.c_str(),
                 std::strerror(errno));
  }
}

}  // namespace revive::applevel
