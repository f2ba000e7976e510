// fd plugin: the sockets the chan plugin does not rebuild (docs/channels.md). Those that hold nothing a
// peer depends on are made again at restore, with their address and the options a program sets before
// bind or connect: a socket not yet bound or connected, an unbound UDP socket, a Unix datagram socket whose
// peer's name is gone (a connected UDP socket is the chan plugin's, its queue too), a netlink socket (a new one, same protocol and groups), and a
// Unix stream whose peer has closed (a pair whose other end is closed,
// its unread bytes written back first: reads give those bytes, then EOF; writes EPIPE). A socket with
// datagrams or netlink replies queued, or a TCP connect in progress, refuses the checkpoint for now (it is
// taken again); anything else refuses it naming the kind, instead of a /dev/null stand-in at restore.
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/sockopt.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

// The options a program sets on a socket before bind/connect that change what it does afterwards.
struct Opt {
  int level, name;
};
constexpr Opt kOpts[kSockOpts] = {
    {SOL_SOCKET, SO_REUSEADDR}, {SOL_SOCKET, SO_REUSEPORT}, {SOL_SOCKET, SO_BROADCAST},
    {SOL_SOCKET, SO_KEEPALIVE}, {SOL_SOCKET, SO_RCVBUF},    {SOL_SOCKET, SO_SNDBUF},
    {IPPROTO_TCP, TCP_NODELAY}, {IPPROTO_IPV6, IPV6_V6ONLY},
};

bool applies(const Opt& o, int domain, int type) {
  // Setting a TCP socket's buffer size turns the kernel's autotuning off for good: left to the kernel.
  if ((o.name == SO_RCVBUF || o.name == SO_SNDBUF) && o.level == SOL_SOCKET)
    return !((domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM);
  if (o.level == IPPROTO_TCP) return (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM;
  if (o.level == IPPROTO_IPV6) return domain == AF_INET6;
  if (o.name == SO_REUSEADDR || o.name == SO_REUSEPORT || o.name == SO_BROADCAST || o.name == SO_KEEPALIVE)
    return domain == AF_INET || domain == AF_INET6;
  return true;
}

bool inet(int domain) { return domain == AF_INET || domain == AF_INET6; }

// Bound to something: an inet port, a Unix path or abstract name, a netlink port id.
bool bound(int domain, const SocketState& s) {
  if (inet(domain)) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(s.local);  // sin_port and sin6_port share the offset
    return s.local_len >= sizeof(sockaddr_in) && a->sin_port != 0;
  }
  if (domain == AF_UNIX) return s.local_len > sizeof(sa_family_t);
  return false;
}

const char* family_name(int domain) {
  switch (domain) {
    case AF_INET: return "IPv4";
    case AF_INET6: return "IPv6";
    case AF_UNIX: return "Unix";
    case AF_NETLINK: return "netlink";
    case AF_PACKET: return "packet";
    default: return "other-family";
  }
}

const char* type_name(int type) {
  switch (type) {
    case SOCK_STREAM: return "stream";
    case SOCK_DGRAM: return "datagram";
    case SOCK_SEQPACKET: return "seqpacket";
    case SOCK_RAW: return "raw";
    default: return "other-type";
  }
}

int refuse(char* why, size_t cap, int domain, int type, const char* what, int rc) {
  Msg(why, cap).s(family_name(domain)).s(" ").s(type_name(type)).s(" socket ").s(what);
  return rc;
}

}  // namespace

int64_t socket_state(int fd, SocketState* s, char* data, size_t cap, char* why, size_t why_cap) {
  memset(s, 0, sizeof *s);
  const int domain = int_opt(fd, SOL_SOCKET, SO_DOMAIN), type = int_opt(fd, SOL_SOCKET, SO_TYPE);
  const int proto = int_opt(fd, SOL_SOCKET, SO_PROTOCOL);
  if (domain < 0 || type < 0 || proto < 0) return refuse(why, why_cap, domain, type, "whose kind cannot be read", -EIO);
  s->domain = domain;
  s->type = type;
  s->protocol = proto;
  socklen_t l = sizeof s->local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(s->local), &l) != 0) l = 0;
  s->local_len = l;
  l = sizeof s->peer;
  const bool has_peer = getpeername(fd, reinterpret_cast<sockaddr*>(s->peer), &l) == 0;
  s->peer_len = has_peer ? l : 0;
  for (uint32_t i = 0; i < kSockOpts; ++i) s->opts[i] = applies(kOpts[i], domain, type) ? int_opt(fd, kOpts[i].level, kOpts[i].name) : -1;
  int queued = 0;
  if (ioctl(fd, SIOCINQ, &queued) != 0) queued = 0;
  // SIOCINQ gives a datagram socket's first datagram's length (0 for an empty one) and fails on netlink;
  // the receive memory counts every queued message.
  uint32_t mi[SK_MEMINFO_VARS];
  socklen_t ml = sizeof mi;
  const bool any_queued = queued > 0 || (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &ml) == 0 &&
                                         ml > SK_MEMINFO_RMEM_ALLOC * sizeof(uint32_t) && mi[SK_MEMINFO_RMEM_ALLOC] > 0);

  if (domain == AF_NETLINK) {
    if (any_queued) return refuse(why, why_cap, domain, type, "with replies not yet read", -EAGAIN);
    auto* nl = reinterpret_cast<sockaddr_nl*>(s->local);
    s->how = nl->nl_pid != 0 || nl->nl_groups != 0 ? kSockBound : kSockFresh;
    nl->nl_pid = 0;  // the kernel gives the new socket a port id of its own
    return 0;
  }
  if (!inet(domain) && domain != AF_UNIX) return refuse(why, why_cap, domain, type, "cannot be restored", -ENOTSUP);
  if (int_opt(fd, SOL_SOCKET, SO_ACCEPTCONN) == 1)  // the chan plugin takes every listener it can
    return refuse(why, why_cap, domain, type, "listener is not rebuilt", -ENOTSUP);
  if (type == SOCK_DGRAM) {
    // The chan plugin takes one bound to a name; what is left has no name, or a peer address.
    if (any_queued) return refuse(why, why_cap, domain, type, "with datagrams queued", -EAGAIN);
    if (has_peer && (inet(domain) || s->peer_len > sizeof(sa_family_t))) {
      s->how = kSockConnected;
      return 0;
    }
    s->how = bound(domain, *s) ? kSockBound : kSockFresh;
    return 0;
  }
  if (type != SOCK_STREAM && type != SOCK_SEQPACKET) return refuse(why, why_cap, domain, type, "cannot be restored", -ENOTSUP);
  if (domain == AF_UNIX) {
    if (has_peer) {  // connected once; the chan plugin takes it while its peer lives
      pollfd p = {fd, POLLRDHUP, 0};
      if (poll(&p, 1, 0) != 1 || !(p.revents & POLLHUP))  // both directions shut: the peer is gone
        return refuse(why, why_cap, domain, type, "is connected but was not rebuilt", -ENOTSUP);
      if (queued > 0 && type != SOCK_STREAM)
        return refuse(why, why_cap, domain, type, "whose peer closed has messages not yet read", -EAGAIN);
      if (queued > 0) {
        ssize_t n = recv(fd, data, cap, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 || n < queued) return refuse(why, why_cap, domain, type, "whose peer closed has more unread bytes than revive keeps", -ENOTSUP);
        s->data_len = uint32_t(n);
      }
      s->how = kSockWidowed;
      return s->data_len;
    }
    if (bound(domain, *s)) return refuse(why, why_cap, domain, type, "bound to a name but neither listening nor connected", -ENOTSUP);
    s->how = kSockFresh;
    return 0;
  }
  tcp_info ti;
  socklen_t tl = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0) return refuse(why, why_cap, domain, type, "whose state cannot be read", -EIO);
  if (ti.tcpi_state == TCP_SYN_SENT) return refuse(why, why_cap, domain, type, "with a connect in progress", -EAGAIN);
  if (ti.tcpi_state != TCP_CLOSE || queued > 0)
    return refuse(why, why_cap, domain, type, "is connected but was not rebuilt", -ENOTSUP);
  s->how = bound(domain, *s) ? kSockBound : kSockFresh;  // never connected (or reset): a new one
  return 0;
}

int restore_socket(RestoreCtx& c, const FdRecord& rec) {
  SocketState s;
  static char data[kSockDataMax];
  if (rec.content_len < int64_t(sizeof s) || !c.in.bytes(&s, sizeof s) || s.data_len > kSockDataMax ||
      rec.content_len != int64_t(sizeof s + s.data_len) || s.local_len > sizeof s.local ||
      s.peer_len > sizeof s.peer || !c.in.bytes(data, s.data_len)) {
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (socket): malformed record"), EINVAL);
  }
  const int flags = SOCK_CLOEXEC | ((rec.flags & O_NONBLOCK) ? SOCK_NONBLOCK : 0);
  int fd = -1;
  const char* step = "socket";
  if (s.how == kSockWidowed) {
    int sv[2];
    if (socketpair(AF_UNIX, s.type | flags, 0, sv) == 0) {
      step = "write back its unread bytes";
      size_t off = 0;
      while (off < s.data_len) {
        ssize_t n = send(sv[1], data + off, s.data_len - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += size_t(n);
      }
      close(sv[1]);
      fd = sv[0];
      if (off < s.data_len) {
        close(fd);
        fd = -1;
      }
    }
  } else if ((fd = socket(s.domain, s.type | flags, s.protocol)) >= 0) {
    for (uint32_t i = 0; i < kSockOpts; ++i) {
      if (s.opts[i] < 0) continue;
      // The kernel reports twice the buffer size it was given (its bookkeeping): give back half.
      int v = kOpts[i].name == SO_RCVBUF || kOpts[i].name == SO_SNDBUF ? s.opts[i] / 2 : s.opts[i];
      setsockopt(fd, kOpts[i].level, kOpts[i].name, &v, sizeof v);  // best effort, as the program's was
    }
    int rc = 0;
    if ((s.how == kSockBound || (s.how == kSockConnected && bound(s.domain, s))) && s.local_len > 0) {
      step = "bind";
      rc = bind(fd, reinterpret_cast<const sockaddr*>(s.local), s.local_len);
      if (rc != 0 && errno == EADDRNOTAVAIL && inet(s.domain)) {  // another host: its port on any address
        if (s.domain == AF_INET) reinterpret_cast<sockaddr_in*>(s.local)->sin_addr.s_addr = htonl(INADDR_ANY);
        else reinterpret_cast<sockaddr_in6*>(s.local)->sin6_addr = in6addr_any;
        rc = bind(fd, reinterpret_cast<const sockaddr*>(s.local), s.local_len);
      }
    }
    if (rc == 0 && s.how == kSockConnected) {
      step = "connect";
      rc = connect(fd, reinterpret_cast<const sockaddr*>(s.peer), s.peer_len);
      // A Unix datagram socket comes here only when its peer was already gone at the checkpoint (the
      // chan plugin takes the others): its sends failed then, and fail now, unconnected.
      if (rc != 0 && s.domain == AF_UNIX) rc = 0;
    }
    if (rc != 0) {
      int e = errno;
      close(fd);
      errno = e;
      fd = -1;
    }
  }
  if (fd < 0) {
    int e = errno ? errno : EIO;
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (").s(family_name(s.domain)).s(" ")
        .s(type_name(s.type)).s(" socket): cannot make it again: ").s(step).s(": ").err(e), e);
  }
  return place(c, fd, rec);
}

}  // namespace revive::plugins
