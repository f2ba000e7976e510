#include "failure_mesh.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace revive::mpi {
namespace {

constexpr uint32_t kMagic = 0x46415652;  // "RVAF"
constexpr size_t kAddrLen = 64;

std::string LocalAddress() {
  if (const char* a = std::getenv("REVIVE_AFT_ADDR"); a && *a) return a;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host, nullptr, &hints, &res) == 0 && res) {
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
      freeaddrinfo(res);
      return buf;
    }
  }
  return "127.0.0.1";
}

// Keepalive so that a peer whose node vanished (no FIN, no RST) is eventually seen dead too.
void KeepAlive(int fd) {
  int on = 1, idle = 5, intvl = 1, cnt = 5;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// 1: read n bytes; 0: end-of-file or reset (the peer is gone).
bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

Status FailureMesh::Open(MPI_Comm comm, std::unique_ptr<FailureMesh>* out) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::unique_ptr<FailureMesh> m(new FailureMesh(rank, size));
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return Status::FromErrno("revive_mpi: failure detector socket", errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t sl = sizeof sa;
  if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(lfd, size + 16) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &sl) != 0) {
    Status s = Status::FromErrno("revive_mpi: failure detector listen", errno);
    close(lfd);
    return s;
  }
  // (A rank whose bind/listen failed returns before the allgather and the others wait there: port 0 fails
  // only when the host is out of ports or descriptors, and then the job cannot run anyway.)
  char mine[kAddrLen] = {0};
  std::snprintf(mine, sizeof mine, "%s %u", LocalAddress().c_str(), static_cast<unsigned>(ntohs(sa.sin_port)));
  std::vector<char> all(kAddrLen * static_cast<size_t>(size));
  MPI_Allgather(mine, kAddrLen, MPI_CHAR, all.data(), kAddrLen, MPI_CHAR, comm);
  Status st;
  for (int p = 0; p < rank && st.ok(); ++p) {
    const char* rec = &all[kAddrLen * static_cast<size_t>(p)];
    char ip[kAddrLen] = {0};
    unsigned port = 0;
    sockaddr_in pa{};
    pa.sin_family = AF_INET;
    if (std::sscanf(rec, "%63s %u", ip, &port) != 2 || inet_pton(AF_INET, ip, &pa.sin_addr) != 1) {
      st = Status::InvalidArgument("revive_mpi: rank " + std::to_string(p) + " published a bad detector address '" +
                                   std::string(rec, strnlen(rec, kAddrLen)) + "' (set REVIVE_AFT_ADDR to an IPv4 address)");
      break;
    }
    pa.sin_port = htons(static_cast<uint16_t>(port));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int32_t me = rank;
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&pa), sizeof pa) != 0 || !WriteAll(fd, &me, sizeof me)) {
      st = Status::FromErrno("revive_mpi: failure detector connect to rank " + std::to_string(p) + " at " + ip + ":" +
                                 std::to_string(port), errno);
      if (fd >= 0) close(fd);
      break;
    }
    KeepAlive(fd);
    m->fd_[static_cast<size_t>(p)] = fd;
  }
  for (int k = rank + 1; k < size && st.ok(); ++k) {
    int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    int32_t who = -1;
    if (fd < 0 || !ReadAll(fd, &who, sizeof who) || who <= rank || who >= size || m->fd_[static_cast<size_t>(who)] >= 0) {
      st = Status::IOError("revive_mpi: failure detector: bad or failed connection from a higher rank (got rank " +
                           std::to_string(who) + ")");
      if (fd >= 0) close(fd);
      break;
    }
    KeepAlive(fd);
    m->fd_[static_cast<size_t>(who)] = fd;
  }
  close(lfd);
  if (!st.ok()) return st;
  *out = std::move(m);
  return Status::OK();
}

FailureMesh::~FailureMesh() {
  for (int fd : fd_)
    if (fd >= 0) close(fd);
}

void FailureMesh::MarkDead(int peer) {
  auto p = static_cast<size_t>(peer);
  dead_[p] = 1;
  if (fd_[p] >= 0) close(fd_[p]);
  fd_[p] = -1;
}

bool FailureMesh::Poll(int timeout_ms) {
  std::vector<pollfd> pf;
  std::vector<int> who;
  for (int p = 0; p < size_; ++p)
    if (fd_[static_cast<size_t>(p)] >= 0) {
      pf.push_back({fd_[static_cast<size_t>(p)], POLLIN, 0});
      who.push_back(p);
    }
  if (!pf.empty() && poll(pf.data(), pf.size(), timeout_ms) > 0) {
    for (size_t i = 0; i < pf.size(); ++i) {
      if (!pf[i].revents) continue;
      char c;
      // Peek: a round message must stay for Agree; only end-of-file or an error means death.
      ssize_t r = recv(pf[i].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (r > 0)
        notified_[static_cast<size_t>(who[i])] = 1;
      else if (r == 0 || (errno != EAGAIN && errno != EINTR))
        MarkDead(who[i]);
    }
  }
  for (int p = 0; p < size_; ++p)
    if (dead_[static_cast<size_t>(p)] || notified_[static_cast<size_t>(p)]) return true;
  return false;
}

std::vector<int> FailureMesh::Dead() const {
  std::vector<int> d;
  for (int p = 0; p < size_; ++p)
    if (dead_[static_cast<size_t>(p)]) d.push_back(p);
  return d;
}

Status FailureMesh::SendSet(int round, const std::vector<char>& set) {
  std::vector<char> msg(8 + set.size());
  uint32_t h[2] = {kMagic, static_cast<uint32_t>(round)};
  std::memcpy(msg.data(), h, 8);
  std::memcpy(msg.data() + 8, set.data(), set.size());
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && !set[static_cast<size_t>(p)] && fd_[static_cast<size_t>(p)] >= 0 &&
        !WriteAll(fd_[static_cast<size_t>(p)], msg.data(), msg.size()))
      MarkDead(p);  // read side will see it too
  return Status::OK();
}

bool FailureMesh::RecvSet(int peer, int round, std::vector<char>* set) {
  int fd = fd_[static_cast<size_t>(peer)];
  uint32_t h[2];
  if (fd < 0 || !ReadAll(fd, h, 8) || !ReadAll(fd, set->data(), set->size())) {
    MarkDead(peer);
    return false;
  }
  if (h[0] != kMagic || h[1] != static_cast<uint32_t>(round)) {
    std::fprintf(stderr, "revive_mpi: failure detector: rank %d sent round %u, expected %d; treating it as dead\n", peer,
                 h[1], round);
    MarkDead(peer);
    return false;
  }
  return true;
}

Status FailureMesh::Agree(std::vector<int>* dead) {
  std::vector<char> set = dead_;
  std::vector<char> other(static_cast<size_t>(size_));
  // Round 1: union of what every survivor saw.
  SendSet(1, set);
  std::vector<char> mine = set;  // who we expect a message from: those not dead when we sent
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || mine[static_cast<size_t>(p)]) continue;
    if (!RecvSet(p, 1, &other)) {
      set[static_cast<size_t>(p)] = 1;
      continue;
    }
    for (size_t i = 0; i < other.size(); ++i) set[i] |= other[i];
  }
  // Round 2: everyone must have reached the same union. We still read from each peer we sent round 1 to,
  // unless it is now known dead: a peer that learned of a death only in round 1 reports it here.
  SendSet(2, set);
  std::string disagree;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || set[static_cast<size_t>(p)]) continue;
    if (!RecvSet(p, 2, &other)) {
      disagree += " rank " + std::to_string(p) + " died during the agreement;";
      set[static_cast<size_t>(p)] = 1;
      continue;
    }
    if (other != set) disagree += " rank " + std::to_string(p) + " saw another failure set;";
  }
  for (int p = 0; p < size_; ++p)
    if (set[static_cast<size_t>(p)]) MarkDead(p);
  std::fill(notified_.begin(), notified_.end(), 0);
  *dead = Dead();
  if (!disagree.empty())
    return Status::IOError("revive_mpi: failures during recovery are not supported:" + disagree);
  return Status::OK();
}

Status FailureMesh::Exchange(const std::vector<char>& mine, std::vector<std::vector<char>>* all) {
  constexpr uint32_t kRound = 3;
  std::vector<char> msg(8 + mine.size());
  const uint32_t h[2] = {kMagic, kRound};
  std::memcpy(msg.data(), h, 8);
  std::memcpy(msg.data() + 8, mine.data(), mine.size());
  all->assign(static_cast<size_t>(size_), {});
  (*all)[static_cast<size_t>(rank_)] = mine;
  std::string lost;
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && fd_[static_cast<size_t>(p)] >= 0 && !WriteAll(fd_[static_cast<size_t>(p)], msg.data(), msg.size()))
      lost += " " + std::to_string(p);
  for (int p = 0; p < size_; ++p) {
    const int fd = fd_[static_cast<size_t>(p)];
    if (p == rank_ || fd < 0) continue;
    uint32_t got[2];
    std::vector<char> theirs(mine.size());
    if (!ReadAll(fd, got, 8) || got[0] != kMagic || got[1] != kRound || !ReadAll(fd, theirs.data(), theirs.size())) {
      MarkDead(p);
      lost += " " + std::to_string(p);
      continue;
    }
    (*all)[static_cast<size_t>(p)] = std::move(theirs);
  }
  if (!lost.empty()) return Status::IOError("revive_mpi: failure detector: ranks lost during the exchange:" + lost);
  return Status::OK();
}

Status FailureMesh::SendBlock(int peer, const std::vector<uint8_t>& data) {
  constexpr uint32_t kRound = 4;
  const int fd = peer >= 0 && peer < size_ ? fd_[static_cast<size_t>(peer)] : -1;
  const uint32_t h[2] = {kMagic, kRound};
  const uint64_t n = data.size();
  if (fd < 0 || !WriteAll(fd, h, 8) || !WriteAll(fd, &n, 8) || !WriteAll(fd, data.data(), data.size()))
    return Status::IOError("revive_mpi: failure detector: cannot send a block to rank " + std::to_string(peer));
  return Status::OK();
}

Status FailureMesh::RecvBlock(int peer, std::vector<uint8_t>* data) {
  constexpr uint32_t kRound = 4;
  const int fd = peer >= 0 && peer < size_ ? fd_[static_cast<size_t>(peer)] : -1;
  uint32_t h[2] = {0, 0};
  uint64_t n = 0;
  if (fd < 0 || !ReadAll(fd, h, 8) || h[0] != kMagic || h[1] != kRound || !ReadAll(fd, &n, 8) ||
      n > (uint64_t{1} << 40)) {
    if (fd >= 0) MarkDead(peer);
    return Status::IOError("revive_mpi: failure detector: no block from rank " + std::to_string(peer));
  }
  data->resize(n);
  if (!ReadAll(fd, data->data(), n)) {
    MarkDead(peer);
    return Status::IOError("revive_mpi: failure detector: rank " + std::to_string(peer) + " lost in the middle of a block");
  }
  return Status::OK();
}

}  // namespace revive::mpi
