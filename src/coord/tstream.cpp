#include "coord/tstream.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace revive::coord {

std::string TBase(const std::string& p) { return p.substr(p.find_last_of('/') + 1); }

Status TMemberData::Open(const std::vector<std::string>& paths, const std::vector<uint64_t>& xxh3,
                         std::vector<TlxFile>* files) {
  std::vector<size_t> order(paths.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return TBase(paths[a]) < TBase(paths[b]); });
  for (size_t i : order) {
    auto f = std::make_unique<TFd>(open(paths[i].c_str(), O_RDONLY | O_CLOEXEC));
    struct stat sb;
    if (f->fd < 0 || fstat(f->fd, &sb) != 0) return Status::FromErrno(paths[i], errno);
    paths_.push_back(paths[i]);
    start_.push_back(size_);
    size_ += (uint64_t)sb.st_size;
    files->push_back({TBase(paths[i]), (uint64_t)sb.st_size, xxh3[i]});
    fds_.push_back(std::move(f));
  }
  return Status::OK();
}

Status TMemberData::Read(uint64_t off, size_t n, char* out) const {
  if (n > 0 && off + n > size_) return Status::IOError("read past the end of " + (paths_.empty() ? "no file" : paths_.back()));
  size_t f = std::upper_bound(start_.begin(), start_.end(), off) - start_.begin() - 1;
  while (n > 0) {
    const uint64_t end = f + 1 < start_.size() ? start_[f + 1] : size_;
    const size_t want = (size_t)std::min<uint64_t>(n, end - off);
    ssize_t r = want == 0 ? 0 : pread(fds_[f]->fd, out, want, (off_t)(off - start_[f]));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno("read " + paths_[f], errno);
    if (r == 0 && want > 0) return Status::IOError("read " + paths_[f] + ": shrank while read");
    if (r == 0) {  // an empty file: the next one
      f++;
      continue;
    }
    off += (uint64_t)r;
    out += r;
    n -= (size_t)r;
    if (off == end) f++;
  }
  return Status::OK();
}

Status TReadAck(int fd, const std::string& who) {
  std::string ack;
  Status st = TlxReadLine(fd, &ack, who + " (answer)");
  if (st.ok() && ack != "OK") st = Status::IOError(who + ": " + ack);
  return st;
}

}  // namespace revive::coord
