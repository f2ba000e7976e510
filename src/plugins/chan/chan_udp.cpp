// The receive queue of a connected UDP socket (kDgramBound with dgram_peer). Only its peer may send to a
// connected socket, so its queued datagrams cannot be sent again from a socket of ours once it is
// connected; but the kernel keeps a socket's receive queue across connect() and recvfrom() reports each
// datagram's own source address. So:
// - save: the queue is read with MSG_PEEK at a moving SO_PEEK_OFF into records [u32 length][bytes] (c.rx,
//   memory the image carries). Nothing is taken out: the original run finds its queue untouched, with
//   no put-back that would need the peer's address.
// - restore: the new socket is bound but not connected yet; a temporary socket bound to the peer's address
//   (SO_REUSEADDR: the restored peer's socket has it too, bind_again) sends the records to it, in order;
//   then it is connected. The program's recv/recvfrom/recvmsg get the same bytes with the peer's address.
//   Temporary sockets of two restored processes bound to each other's addresses would take each other's
//   datagrams (two sockets on one address: the kernel delivers to one of them), so each holds a lock (an
//   abstract Unix name, one per network namespace, the scope of the ports) while its temporary socket
//   exists. Where the peer's address cannot be bound (an outside process holds it without SO_REUSEADDR,
//   or it is not on this host and no transparent socket may bind it), the records come from a socket of
//   ours, with a warning: recvfrom reports that socket's address for them.
// - another host: an address gone at restore is replaced by the same port on every address. A socket whose
//   peer is in the computation (found at save) is connected only in the reconnect phase, to the address
//   the peer publishes then (it may have moved too), and gets its queue from there first.
#include <errno.h>
#include <linux/sock_diag.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr size_t kMaxDatagram = 1 << 16;  // a UDP payload is at most 65507 (IPv4) / 65527 (IPv6) bytes

int udp_err(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("process ").u(uint64_t(getpid())).s(" fd ").i(c.fd).s(" (connected UDP socket): ").s(what)
      .s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

bool bound_specific(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr != htonl(INADDR_ANY);
  return memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, &in6addr_any, 16) != 0;
}

// SO_MEMINFO field k of socket s (UINT32_MAX if unknown: never taken for an empty queue).
uint32_t meminfo(int s, int k) {
  uint32_t mi[SK_MEMINFO_VARS];
  socklen_t l = sizeof mi;
  return getsockopt(s, SOL_SOCKET, SO_MEMINFO, mi, &l) == 0 && l > socklen_t(k) * 4 ? mi[k] : UINT32_MAX;
}

// One peek into a new record of c.rx (its length and bytes). The datagram's size or -errno.
ssize_t peek_record(Chan& c) {
  if (!c.rx.reserve(4 + kMaxDatagram)) return -ENOMEM;
  ssize_t n;
  do n = recv(c.fd, c.rx.p + c.rx.len + 4, kMaxDatagram, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  if (size_t(n) > kMaxDatagram) return -EMSGSIZE;
  uint32_t len = uint32_t(n);
  memcpy(c.rx.p + c.rx.len, &len, 4);
  c.rx.len += 4 + size_t(n);
  return n;
}

void nap_ms(long ms) {
  timespec ts = {0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The host's (network namespace's) lock for temporary sockets on other sockets' addresses: a bound
// abstract name, released by close or by the death of its holder. -1 after 10 s (taken anyway: a stuck
// holder must not fail the restart).
int lock_requeue() {
  sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  static const char kName[] = "revive-udp-requeue";
  memcpy(a.sun_path + 1, kName, sizeof kName - 1);
  socklen_t l = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + sizeof kName - 1);
  for (int k = 0; k < 10000; ++k) {
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    if (bind(s, reinterpret_cast<sockaddr*>(&a), l) == 0) return s;
    close(s);
    if (errno != EADDRINUSE) return -1;
    nap_ms(1);
  }
  return -1;
}

// Sends c's records to `to` from socket t. False with errno.
bool send_records(const Chan& c, int t, const sockaddr_storage& to, socklen_t to_len) {
  for (size_t off = 0; off + 4 <= c.rx.len;) {
    uint32_t n;
    memcpy(&n, c.rx.p + off, 4);
    if (off + 4 + n > c.rx.len) {
      errno = EINVAL;
      return false;
    }
    ssize_t w;
    do w = sendto(t, c.rx.p + off + 4, n, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), to_len);
    while (w < 0 && errno == EINTR);
    if (w != ssize_t(n)) return false;
    off += 4 + n;
  }
  return true;
}

}  // namespace

int keep_udp_queue(Chan& c, char* msg, size_t cap) {
  c.rx.clear();
  // SO_MEMINFO's receive memory is 0 only with nothing queued (a zero-length datagram has a size too);
  // unlike a recv, asking leaves a pending ICMP error (ECONNREFUSED) for the program.
  if (meminfo(c.fd, SK_MEMINFO_RMEM_ALLOC) == 0) return 0;
  int old = -1;
  socklen_t l = sizeof old;
  if (getsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &old, &l) != 0) old = -1;
  // A plain peek first: a zero-length datagram at the head that the program itself peeked is marked, and
  // a walk at an offset skips marked empty datagrams. This peek marks an empty head either way, so it is
  // kept here and the walk skips it; a non-empty head is kept by the walk.
  int off = -1;
  setsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off);
  ssize_t n = peek_record(c);
  if (n == -ECONNREFUSED || n == -EHOSTUNREACH || n == -ENETUNREACH) n = peek_record(c);  // a pending ICMP
      // error comes first and is cleared by any recv; the program does not get it (docs/channels.md)
  int rc = 0;
  if (n > 0) {
    c.rx.len -= 4 + size_t(n);  // the walk keeps it
  } else if (n < 0 && n != -EAGAIN) {
    rc = int(n);
  }
  off = 0;
  if (rc == 0 && n >= 0 && setsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) != 0) rc = -errno;
  while (rc == 0 && n >= 0) {
    ssize_t m = peek_record(c);
    if (m == -EAGAIN) break;
    if (m < 0) rc = int(m);
  }
  setsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof old);
  if (rc != 0) {
    c.rx.clear();
    return udp_err(msg, cap, c, "cannot read its queued datagrams", -rc);
  }
  return 0;
}

int requeue_udp(Chan& c, int s, char* msg, size_t cap) {
  // The queue the original socket held fit in its receive buffer: the new one gets the same size, or
  // datagrams would be dropped here, or later, when the program's peer fills it as it did before.
  // (SO_RCVBUF doubles what it is given; FORCE where allowed, as the original may have had it.)
  if (c.rcvbuf > 0) {
    int half = c.rcvbuf / 2;
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &half, sizeof half) != 0)
      setsockopt(s, SOL_SOCKET, SO_RCVBUF, &half, sizeof half);
  }
  if (c.rx.len == 0) return 0;
  sockaddr_storage me;
  socklen_t me_len = sizeof me;
  if (getsockname(s, reinterpret_cast<sockaddr*>(&me), &me_len) != 0) return udp_err(msg, cap, c, "getsockname", errno);
  // Sent to the address the new socket is bound to; a wildcard one is reached on loopback.
  if (c.family == AF_INET && !bound_specific(me)) reinterpret_cast<sockaddr_in&>(me).sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (c.family == AF_INET6 && !bound_specific(me)) reinterpret_cast<sockaddr_in6&>(me).sin6_addr = in6addr_loopback;
  size_t want = count_records(c.rx);
  uint32_t drops = meminfo(s, SK_MEMINFO_DROPS);
  if (c.peer_len == c.local_len && memcmp(&c.peer, &c.local, c.local_len) == 0) {
    // Connected to itself: it is its own peer, and a second socket on its address could take the datagrams.
    if (!send_records(c, s, me, me_len)) return udp_err(msg, cap, c, "cannot queue its datagrams again", errno);
    return 0;
  }
  int lock = lock_requeue();
  int t = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int one = 1;
  bool as_peer = t >= 0 && setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
                 bind(t, reinterpret_cast<const sockaddr*>(&c.peer), c.peer_len) == 0;
  int bind_errno = errno;
  if (t >= 0 && !as_peer && bind_errno == EADDRNOTAVAIL) {
    // The peer is on another host: a transparent socket may bind its address here (CAP_NET_ADMIN or
    // CAP_NET_RAW), and loopback delivers what it sends to a local socket with that source address.
    bool v6 = c.family == AF_INET6;
    as_peer = setsockopt(t, v6 ? SOL_IPV6 : SOL_IP, v6 ? IPV6_TRANSPARENT : IP_TRANSPARENT, &one, sizeof one) == 0 &&
              bind(t, reinterpret_cast<const sockaddr*>(&c.peer), c.peer_len) == 0;
    if (!as_peer) errno = bind_errno;
  }
  if (t >= 0 && !as_peer) {  // from a socket of ours instead (any address, a free port)
    close(t);
    t = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  bool sent = t >= 0 && send_records(c, t, me, me_len);
  int e = errno;
  if (t >= 0) close(t);
  if (lock >= 0) close(lock);
  if (!sent) return udp_err(msg, cap, c, "cannot queue its datagrams again", e);
  // Loopback and veth deliver within sendto (a short wait covers a slower path: after the connect,
  // datagrams from another address would be dropped); a full receive buffer drops them, counted.
  for (int k = 0; k < 200 && meminfo(s, SK_MEMINFO_RMEM_ALLOC) == 0; ++k) nap_ms(5);
  if (uint32_t lost = meminfo(s, SK_MEMINFO_DROPS) - drops) {
    char what[160];
    plugins::Msg(what, sizeof what).u(lost).s(" of its ").u(want)
        .s(" queued datagrams were dropped when queued again (receive buffer)");
    return udp_err(msg, cap, c, what, ENOBUFS);
  }
  if (!as_peer) {
    char line[400];
    plugins::Msg(line, sizeof line).s("process ").u(uint64_t(getpid())).s(" fd ").i(c.fd)
        .s(" (connected UDP socket): its peer's address cannot be bound here (").err(bind_errno)
        .s(bind_errno == EADDRNOTAVAIL ? "; on another host, only a transparent socket can: CAP_NET_ADMIN" : "")
        .s("), so its ").u(want).s(" queued datagrams were queued again from another address: recvfrom reports ")
        .s("that address for them, not the peer's");
    plugins::warn(line);
  }
  return 0;
}

int rebind_elsewhere(Chan& c, int* s, char* msg, size_t cap) {
  // Its port on every address of this host, as a listener whose address is gone (chan_connect.cpp): the
  // coordinator link that tells this host's own address is not up yet at restore, and connect() gives the
  // socket the address its route to the peer leaves from.
  sockaddr_storage any;
  memset(&any, 0, sizeof any);
  any.ss_family = sa_family_t(c.family);
  reinterpret_cast<sockaddr_in&>(any).sin_port = reinterpret_cast<const sockaddr_in&>(c.local).sin_port;  // same
      // offset in sockaddr_in6
  int t = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (t < 0) return udp_err(msg, cap, c, "socket", errno);
  if (!bind_again(c, t, &any)) {
    int e = errno;
    close(t);
    char what[160];
    plugins::Msg(what, sizeof what).s("its address is not on this host, and its port ")
        .u(ntohs(reinterpret_cast<const sockaddr_in&>(c.local).sin_port)).s(" cannot be bound on this one either");
    return udp_err(msg, cap, c, what, e);
  }
  *s = t;
  return 0;
}

namespace {

// f(c) for each connected UDP socket restored unconnected (udp_deferred); the first error ends it.
template <typename F>
int each_deferred(F f) {
  for (uint32_t i = 0; i < g_nchans; ++i)
    if (udp_deferred(g_chans[i]))
      if (int rc = f(g_chans[i])) return rc;
  return 0;
}

}  // namespace

int udp_publish(uint64_t gen, char* msg, size_t cap) {
  return each_deferred([&](Chan& c) {
    sockaddr_storage a;
    socklen_t l = sizeof a;
    if (getsockname(c.fd, reinterpret_cast<sockaddr*>(&a), &l) != 0) return udp_err(msg, cap, c, "getsockname", errno);
    if (!bound_specific(a)) {  // rebound on every address (another host): this host's own, reached from outside
      in_port_t port = reinterpret_cast<sockaddr_in&>(a).sin_port;
      my_address(c, &a);
      reinterpret_cast<sockaddr_in&>(a).sin_port = port;
    }
    return publish_addr(c, gen, "chanv.", a, l, msg, cap);
  });
}

int udp_connect(uint64_t gen, char* msg, size_t cap) {
  return each_deferred([&](Chan& c) {
    sockaddr_storage a;
    size_t n = 0;
    if (int rc = lookup_addr(c, gen, "chanv.", &a, &n, msg, cap)) return rc;
    memcpy(&c.peer, &a, sizeof a);  // where the peer is now (another host, maybe): its datagrams come from there
    c.peer_len = uint32_t(n);
    if (int rc = requeue_udp(c, c.fd, msg, cap)) return rc;
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&c.peer), c.peer_len) != 0)
      return udp_err(msg, cap, c, "cannot connect it to its peer's new address", errno);
    return 0;
  });
}

}  // namespace revive::chan
