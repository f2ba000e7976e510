#include "coord/tlx.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include <xxhash.h>

#include "coord/sha256.h"
#include "coord/tlevels.h"
#include "core/env.h"

namespace revive::coord {
namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

void SetTimeouts(int fd, double s) {
  struct timeval tv;
  tv.tv_sec = (time_t)s;
  tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// To a socket (MSG_NOSIGNAL: a peer that hung up is an error, not SIGPIPE) or, with file=true, a file.
Status WriteAll(int fd, const void* p, size_t n, const std::string& what, bool file = false) {
  const char* c = (const char*)p;
  while (n > 0) {
    ssize_t w = file ? write(fd, c, n) : send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::FromErrno(what, w < 0 ? errno : EPIPE);
    c += w;
    n -= (size_t)w;
  }
  return Status::OK();
}

Status ReadAll(int fd, void* p, size_t n, const std::string& what) {
  char* c = (char*)p;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno(what, errno == EAGAIN ? ETIMEDOUT : errno);
    if (r == 0) return Status::IOError(what + ": connection closed");
    c += r;
    n -= (size_t)r;
  }
  return Status::OK();
}

Status ReadLine(int fd, std::string* line, const std::string& what) {
  line->clear();
  for (;;) {
    char ch;
    Status s = ReadAll(fd, &ch, 1, what);
    if (!s.ok()) return s;
    if (ch == '\n') return Status::OK();
    if (line->size() > 8192) return Status::Corruption(what + ": header line too long");
    line->push_back(ch);
  }
}

bool GoodName(const std::string& n) { return !n.empty() && n[0] != '.' && n.find('/') == std::string::npos; }

std::string Base(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

Status TlxListen(const std::string& ip, int* fd, uint16_t* port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) return Status::InvalidArgument(ip + ": not an IPv4 address");
  int f = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (f < 0) return Status::FromErrno("socket", errno);
  socklen_t len = sizeof a;
  if (bind(f, (sockaddr*)&a, sizeof a) != 0 || listen(f, 16) != 0 || getsockname(f, (sockaddr*)&a, &len) != 0) {
    int e = errno;
    close(f);
    return Status::FromErrno("listen on " + ip, e);
  }
  *fd = f;
  *port = ntohs(a.sin_port);
  return Status::OK();
}

Status TlxConnect(const std::string& addr, const std::string& secret, double timeout_s, int* fd) {
  size_t colon = addr.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos || inet_pton(AF_INET, addr.substr(0, colon).c_str(), &a.sin_addr) != 1)
    return Status::InvalidArgument("image exchange address \"" + addr + "\"");
  a.sin_port = htons((uint16_t)atoi(addr.c_str() + colon + 1));
  const std::string who = "image exchange with " + addr;
  Fd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return Status::FromErrno("socket", errno);
  SetTimeouts(s.fd, timeout_s);
  if (connect(s.fd, (sockaddr*)&a, sizeof a) != 0) return Status::FromErrno("connect: " + who, errno);
  uint8_t nonce[32], mac[32];
  Status st = ReadAll(s.fd, nonce, sizeof nonce, who + " (nonce)");
  if (!st.ok()) return st;
  hmac_sha256(secret.data(), secret.size(), nonce, sizeof nonce, mac);
  if (!(st = WriteAll(s.fd, mac, sizeof mac, who)).ok()) return st;
  *fd = s.fd;
  s.fd = -1;
  return Status::OK();
}

Status TlxSend(const std::string& addr, const std::string& secret, uint64_t gen, const std::string& from_host,
               const std::vector<std::string>& paths, std::vector<TlxFile>* sent, double timeout_s) {
  const std::string who = "image exchange with " + addr;
  Fd s;
  Status st = TlxConnect(addr, secret, timeout_s, &s.fd);
  if (!st.ok()) return st;
  std::string head = "tlx 1 " + std::to_string(gen) + " " + from_host + " " + std::to_string(paths.size()) + "\n";
  if (!(st = WriteAll(s.fd, head.data(), head.size(), who)).ok()) return st;
  std::vector<char> buf(1 << 20);
  sent->clear();
  for (const std::string& p : paths) {
    Fd f(open(p.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat sb;
    if (f.fd < 0 || fstat(f.fd, &sb) != 0) return Status::FromErrno(p, errno);
    TlxFile tf{Base(p), (uint64_t)sb.st_size, 0};
    std::string line = tf.name + " " + std::to_string(tf.size) + "\n";
    if (!(st = WriteAll(s.fd, line.data(), line.size(), who)).ok()) return st;
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    uint64_t left = tf.size;
    while (left > 0) {
      ssize_t n = read(f.fd, buf.data(), std::min<uint64_t>(buf.size(), left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        XXH3_freeState(h);
        return n < 0 ? Status::FromErrno("read " + p, errno) : Status::IOError(p + ": shrank while sent");
      }
      XXH3_64bits_update(h, buf.data(), (size_t)n);
      if (!(st = WriteAll(s.fd, buf.data(), (size_t)n, who)).ok()) {
        XXH3_freeState(h);
        return st;
      }
      left -= (uint64_t)n;
    }
    tf.xxh3 = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    char tail[24];
    snprintf(tail, sizeof tail, "%016llx\n", (unsigned long long)tf.xxh3);
    if (!(st = WriteAll(s.fd, tail, 17, who)).ok()) return st;
    sent->push_back(tf);
  }
  std::string ack;
  if (!(st = ReadLine(s.fd, &ack, who + " (answer)")).ok()) return st;
  if (ack != "OK") return Status::IOError(who + ": " + ack);
  return Status::OK();
}

Status TlxAccept(int listen_fd, const std::string& secret, double timeout_s, int* fd, std::string* who_out) {
  struct pollfd pf = {listen_fd, POLLIN, 0};
  int pr = poll(&pf, 1, (int)(timeout_s * 1000));
  if (pr <= 0) return Status::IOError("image exchange: nobody connected within " + std::to_string((int)timeout_s) + " s");
  sockaddr_in peer{};
  socklen_t plen = sizeof peer;
  Fd s(accept4(listen_fd, (sockaddr*)&peer, &plen, SOCK_CLOEXEC));
  if (s.fd < 0) return Status::FromErrno("accept (image exchange)", errno);
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
  const std::string who = std::string("image exchange from ") + ip;
  *who_out = who;
  SetTimeouts(s.fd, timeout_s);
  uint8_t nonce[32], mac[32], want[32];
  if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) return Status::FromErrno("getrandom", errno);
  Status st = WriteAll(s.fd, nonce, sizeof nonce, who);
  if (st.ok()) st = ReadAll(s.fd, mac, sizeof mac, who + " (proof)");
  if (!st.ok()) return st;
  hmac_sha256(secret.data(), secret.size(), nonce, sizeof nonce, want);
  if (memcmp(mac, want, sizeof mac) != 0) return TlxRefuse(s.fd, who, "does not hold the computation's secret");
  *fd = s.fd;
  s.fd = -1;
  return Status::OK();
}

Status TlxReceive(int listen_fd, const std::string& secret, uint64_t gen, const std::string& expect_from,
                  const std::string& dest_dir, double timeout_s, std::vector<TlxFile>* got, std::string* from_out) {
  struct pollfd pf = {listen_fd, POLLIN, 0};
  if (poll(&pf, 1, (int)(timeout_s * 1000)) <= 0)
    return Status::IOError("image exchange: no copy from " + (expect_from.empty() ? "the sender" : "host " + expect_from) +
                           " within " + std::to_string((int)timeout_s) + " s");
  std::string who;
  Fd s;
  Status st = TlxAccept(listen_fd, secret, timeout_s, &s.fd, &who);
  if (!st.ok()) return st;
  auto refuse = [&](const std::string& why) { return TlxRefuse(s.fd, who, why); };
  std::string line;
  if (!(st = ReadLine(s.fd, &line, who)).ok()) return st;
  char from[256] = "";
  unsigned long long g = 0;
  size_t n = 0;
  if (sscanf(line.c_str(), "tlx 1 %llu %255s %zu", &g, from, &n) != 3) return refuse("bad header \"" + line + "\"");
  if (!TlxGoodHost(from)) return refuse(std::string("bad host name \"") + from + "\"");
  if (g != gen) return refuse("sends generation " + std::to_string(g) + ", expected " + std::to_string(gen));
  if (!expect_from.empty() && expect_from != from)
    return refuse(std::string("says it is host ") + from + ", expected " + expect_from);
  std::string dest = dest_dir;  // "{from}" names the sender's host
  if (size_t at = dest.find("{from}"); at != std::string::npos) dest.replace(at, 6, from);
  st = CreateDirs(Env::Default(), dest);
  if (!st.ok()) return refuse(st.ToString());
  std::vector<char> buf(1 << 20);
  got->clear();
  for (size_t i = 0; i < n; i++) {
    if (!(st = ReadLine(s.fd, &line, who)).ok()) return st;
    char name[512] = "";
    unsigned long long size = 0;
    if (sscanf(line.c_str(), "%511s %llu", name, &size) != 2 || !GoodName(name)) return refuse("bad file line \"" + line + "\"");
    const std::string tmp = dest + "/." + name + ".tmp", dst = dest + "/" + name;
    Fd f(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (f.fd < 0) return refuse("cannot create " + tmp + ": " + strerror(errno));
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    uint64_t left = size;
    while (left > 0 && st.ok()) {
      size_t want_n = (size_t)std::min<uint64_t>(buf.size(), left);
      st = ReadAll(s.fd, buf.data(), want_n, who + " (" + name + ")");
      if (st.ok()) XXH3_64bits_update(h, buf.data(), want_n);
      if (st.ok()) st = WriteAll(f.fd, buf.data(), want_n, tmp, /*file=*/true);
      left -= want_n;
    }
    uint64_t sum = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    std::string tail;
    if (st.ok()) st = ReadLine(s.fd, &tail, who);
    uint64_t said = 0;
    if (st.ok() && (!ParseHex64(tail, &said) || said != sum))
      st = Status::Corruption(who + ": " + name + " arrived with checksum " + tail + ", computed " + Hex64(sum));
    if (st.ok() && fsync(f.fd) != 0) st = Status::FromErrno("fsync " + tmp, errno);
    if (st.ok() && rename(tmp.c_str(), dst.c_str()) != 0) st = Status::FromErrno("rename " + tmp, errno);
    if (!st.ok()) {
      unlink(tmp.c_str());
      return refuse(st.ToString());
    }
    got->push_back({name, size, sum});
  }
  if (from_out != nullptr) *from_out = from;
  Fd d(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd >= 0) fsync(d.fd);
  return WriteAll(s.fd, "OK\n", 3, who);
}

// A host name as hosts.md allows them ([A-Za-z0-9._:@-], not starting with '.'): it becomes part of a path.
bool TlxGoodHost(const std::string& h) {
  return !h.empty() && h[0] != '.' && h.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                          "0123456789._:@-") == std::string::npos;
}

Status TlxWrite(int fd, const void* p, size_t n, const std::string& what) { return WriteAll(fd, p, n, what); }
Status TlxRead(int fd, void* p, size_t n, const std::string& what) { return ReadAll(fd, p, n, what); }
Status TlxReadLine(int fd, std::string* line, const std::string& what) { return ReadLine(fd, line, what); }

Status TlxRefuse(int fd, const std::string& who, const std::string& why) {
  std::string m = "ERR " + why + "\n";
  (void)!send(fd, m.data(), m.size(), MSG_NOSIGNAL);
  return Status::IOError(who + ": " + why);
}

}  // namespace revive::coord
