// Message sockets between processes of the computation (Unix SOCK_DGRAM and SOCK_SEQPACKET: socketpairs
// across fork, pairs bound to names and connected to each other). They are drained and refilled like
// stream connections (chan_drain.cpp, chan_refill.cpp), one datagram at a time: the marker is a datagram
// of its own, the drained messages are kept as records [u32 length][bytes] so their boundaries and order
// survive, and the refill exchange sends [u64 count] then each record as a datagram. On restart a
// SOCK_SEQPACKET connection is rebuilt like a stream one (listen/connect/accept); a SOCK_DGRAM pair has no
// accept, so each end binds (its old name, else an autobound abstract one), publishes its address and
// connects to the other's.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

int fail(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (datagram socket): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

}  // namespace

ssize_t next_msg_len(const Chan& c) {
  char one;
  ssize_t n = recv(c.fd, &one, 1, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);  // MSG_TRUNC: the real length
  if (n < 0) return -errno;
  // SOCK_SEQPACKET reports its end of file as 0 too: an empty message there counts as end of file.
  return n == 0 && c.type == SOCK_SEQPACKET ? -EPIPE : n;
}

bool recv_msg(const Chan& c, Bytes& b, size_t len) {
  if (!b.reserve(4 + len)) {
    errno = ENOMEM;
    return false;
  }
  ssize_t r = recv(c.fd, b.p + b.len + 4, len, MSG_DONTWAIT);
  if (r < 0) return false;
  uint32_t n = uint32_t(r);
  memcpy(b.p + b.len, &n, 4);
  b.len += 4 + size_t(r);
  return true;
}

bool send_record(const Chan& c, const Bytes& b, size_t* off) {
  uint32_t n;
  memcpy(&n, b.p + *off, 4);
  ssize_t w = send(c.fd, b.p + *off + 4, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w < 0) return false;
  *off += 4 + n;
  return true;
}

size_t count_records(const Bytes& b) {
  size_t k = 0;
  for (size_t off = 0; off + 4 <= b.len; ++k) {
    uint32_t n;
    memcpy(&n, b.p + off, 4);
    off += 4 + n;
  }
  return k;
}

int dgram_bind(Chan& c, uint64_t gen, const char* prefix, char* msg, size_t cap) {
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(msg, cap, c, "socket", errno);
  sockaddr_storage a;
  socklen_t len;
  const sockaddr_un& un = reinterpret_cast<const sockaddr_un&>(c.local);
  if (c.local_len > sizeof(sa_family_t)) {  // its old name; a socket file the killed process left goes
    struct stat st;
    if (un.sun_path[0] && stat(un.sun_path, &st) == 0 && S_ISSOCK(st.st_mode)) unlink(un.sun_path);
    memcpy(&a, &c.local, sizeof a);
    len = c.local_len;
  } else {  // autobind: an abstract name the kernel picks
    memset(&a, 0, sizeof a);
    a.ss_family = AF_UNIX;
    len = sizeof(sa_family_t);
  }
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    int e = errno;
    close(s);
    return fail(msg, cap, c, un.sun_path[0] ? "cannot bind its name again" : "cannot bind", e);
  }
  len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  if (int rc = place_socket(c, s, msg, cap)) return rc;
  return publish_addr(c, gen, prefix, a, len, msg, cap);
}

int dgram_connect(Chan& c, uint64_t gen, const char* prefix, char* msg, size_t cap) {
  sockaddr_storage a;
  size_t n = 0;
  if (int rc = lookup_addr(c, gen, prefix, &a, &n, msg, cap)) return rc;
  if (connect(c.fd, reinterpret_cast<sockaddr*>(&a), socklen_t(n)) != 0)
    return fail(msg, cap, c, "cannot connect to the peer", errno);
  return 0;
}

}  // namespace revive::chan
