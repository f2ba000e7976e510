// The receive queue of a bound datagram socket (kDgramBound): a UDP socket, connected (dgram_peer) or
// not, or a Unix datagram socket bound to a name. Any process may send to an unconnected one, only its
// peer to a connected one, and the program's recvfrom/recvmsg see each datagram's source address. The
// kernel keeps a socket's receive queue across connect() and reports each datagram's own source, so:
// - save: the queue is read with MSG_PEEK at a moving SO_PEEK_OFF into records [u32 length][bytes] (c.rx,
//   memory the image carries), and, not connected, each datagram's source into c.src. Nothing is taken
//   out: the original run finds its queue untouched, sources included.
// - restore: the new socket is bound but not connected yet; a temporary socket bound to each datagram's
//   source address (connected: the peer's; UDP with SO_REUSEADDR: a restored socket of the computation
//   on that address has it too, bind_again) sends the records to it, in order; then a connected one is
//   connected. The program's recv/recvfrom/recvmsg get the same bytes from the same addresses.
//   Temporary sockets of two restored processes bound to each other's addresses would take each other's
//   datagrams (two sockets on one address: the kernel delivers to one of them), so each holds a lock (an
//   abstract Unix name, one per network namespace, the scope of the ports) while its temporary sockets
//   exist. Where a source cannot be bound (an outside process holds it without SO_REUSEADDR; an address
//   not on this host, which only a transparent socket may bind; a Unix name a restored socket holds
//   already, or a path name, which a temporary socket would have to create in the file system), those
//   records come from a socket of ours, with a warning naming how many: recvfrom reports another address
//   for them. An unnamed Unix sender stays unnamed.
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
  plugins::Msg(msg, cap).s("process ").u(uint64_t(getpid())).s(" fd ").i(c.fd)
      .s(c.dgram_peer ? " (connected UDP socket): " : " (bound datagram socket): ").s(what).s(": ").err(e);
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

// One peek into a new record of c.rx (its length and bytes) and, with_src, one of c.src (its source).
// The datagram's size or -errno.
ssize_t peek_record(Chan& c, bool with_src) {
  if (!c.rx.reserve(4 + kMaxDatagram) || (with_src && !c.src.reserve(4 + sizeof(sockaddr_storage)))) return -ENOMEM;
  sockaddr_storage from;
  iovec iov = {c.rx.p + c.rx.len + 4, kMaxDatagram};
  msghdr m = {};
  m.msg_name = &from;
  m.msg_namelen = sizeof from;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  ssize_t n;
  do n = recvmsg(c.fd, &m, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  if (size_t(n) > kMaxDatagram) return -EMSGSIZE;
  uint32_t len = uint32_t(n);
  memcpy(c.rx.p + c.rx.len, &len, 4);
  c.rx.len += 4 + size_t(n);
  if (with_src) {
    uint32_t al = m.msg_namelen <= sizeof from ? uint32_t(m.msg_namelen) : 0;
    memcpy(c.src.p + c.src.len, &al, 4);
    memcpy(c.src.p + c.src.len + 4, &from, al);
    c.src.len += 4 + al;
  }
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

// Whether a source names an address (a Unix sender may be unnamed: no path, no abstract name).
bool named(const Chan& c, uint32_t len) { return len > 0 && !(c.family == AF_UNIX && len <= sizeof(sa_family_t)); }

// A temporary socket to send from `src`: bound to it if it can be (*bound says whether; else *bind_errno
// says why), or unbound (UDP: a free port at the first send; Unix: unnamed). -1 only if no socket.
int sender_at(const Chan& c, const sockaddr_storage& src, uint32_t len, bool* bound, int* bind_errno) {
  *bound = false;
  *bind_errno = 0;
  int t = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (t < 0 || !named(c, len)) return t;
  if (c.family == AF_UNIX && reinterpret_cast<const sockaddr_un&>(src).sun_path[0]) {
    *bind_errno = EEXIST;  // a path: binding would create a file in the program's file system
    return t;
  }
  int one = 1;
  if (c.family != AF_UNIX) setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  *bound = bind(t, reinterpret_cast<const sockaddr*>(&src), socklen_t(len)) == 0;
  if (!*bound) *bind_errno = errno;
  if (!*bound && *bind_errno == EADDRNOTAVAIL && c.family != AF_UNIX) {
    // Not on this host: a transparent socket may bind it here (CAP_NET_ADMIN or CAP_NET_RAW), and
    // loopback delivers what it sends to a local socket with that source address.
    bool v6 = c.family == AF_INET6;
    *bound = setsockopt(t, v6 ? SOL_IPV6 : SOL_IP, v6 ? IPV6_TRANSPARENT : IP_TRANSPARENT, &one, sizeof one) == 0 &&
             bind(t, reinterpret_cast<const sockaddr*>(&src), socklen_t(len)) == 0;
  }
  if (!*bound) {  // a fresh socket: a failed bind may leave options behind
    close(t);
    t = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  return t;
}

// Datagrams queued again from a stand-in sender (see standin_source in chan.h): the stand-in's family and
// port (an address of this host, autobound at its first send), the source the datagram had, and how many
// of its datagrams are still to be read. Entries in send order; a spent one stays (left 0).
struct StandIn {
  uint16_t fam, port;
  uint32_t left;
  sockaddr_storage src;
  uint32_t src_len;
};
constexpr uint32_t kMaxStandIns = 64;
StandIn g_standins[kMaxStandIns];
uint32_t g_nstandins;  // published last (release): the receive wrappers read only up to it

// One more datagram sent from stand-in t for source src (restore: one thread).
void note_standin(const Chan& c, int t, const uint8_t* src, uint32_t src_len) {
  if (c.family != AF_INET && c.family != AF_INET6) return;
  sockaddr_storage me{};
  socklen_t l = sizeof me;
  if (getsockname(t, reinterpret_cast<sockaddr*>(&me), &l) != 0) return;
  const uint16_t port = port_of(reinterpret_cast<const sockaddr*>(&me));
  uint32_t n = g_nstandins;
  if (n > 0) {
    StandIn& last = g_standins[n - 1];
    if (last.port == port && last.fam == c.family && last.src_len == src_len && memcmp(&last.src, src, src_len) == 0) {
      __atomic_add_fetch(&last.left, 1u, __ATOMIC_RELEASE);
      return;
    }
  }
  if (n == kMaxStandIns) return;  // reported from the stand-in, as before (the warning says so)
  StandIn& e = g_standins[n];
  e.fam = uint16_t(c.family);
  e.port = port;
  e.left = 1;
  memset(&e.src, 0, sizeof e.src);
  memcpy(&e.src, src, src_len);
  e.src_len = src_len;
  __atomic_store_n(&g_nstandins, n + 1, __ATOMIC_RELEASE);
}

// Sends c's records to `to`, each from its source (c.src; connected: c.peer), or all from s itself
// (`self`). Counts in *unbound the records whose named source could not be bound (*bind_errno: the first
// reason). False with errno.
bool send_records(const Chan& c, int s, bool self, const sockaddr_storage& to, socklen_t to_len, size_t* unbound,
                  int* bind_errno) {
  int t = -1;
  bool t_bound = false;
  const uint8_t* cur = nullptr;  // the source t was made for
  uint32_t cur_len = 0;
  size_t so = 0;
  bool ok = true;
  for (size_t off = 0; ok && off + 4 <= c.rx.len;) {
    uint32_t n;
    memcpy(&n, c.rx.p + off, 4);
    if (off + 4 + n > c.rx.len) {
      errno = EINVAL;
      ok = false;
      break;
    }
    const uint8_t* src = reinterpret_cast<const uint8_t*>(&c.peer);
    uint32_t src_len = c.peer_len;
    if (!c.dgram_peer) {  // its own record in c.src (none: an unnamed sender)
      src_len = 0;
      if (so + 4 <= c.src.len) {
        memcpy(&src_len, c.src.p + so, 4);
        if (src_len > sizeof(sockaddr_storage) || so + 4 + src_len > c.src.len) src_len = 0;
        src = c.src.p + so + 4;
        so += 4 + size_t(src_len);
      }
    }
    int from = s;
    if (!self) {
      if (t < 0 || src_len != cur_len || memcmp(src, cur, src_len) != 0) {
        if (t >= 0) close(t);
        sockaddr_storage a = {};
        memcpy(&a, src, src_len);
        int be = 0;
        t = sender_at(c, a, src_len, &t_bound, &be);
        if (t < 0) {
          ok = false;
          break;
        }
        if (be && *bind_errno == 0) *bind_errno = be;
        cur = src;
        cur_len = src_len;
      }
      from = t;
      if (!t_bound && named(c, src_len)) ++*unbound;
    }
    ssize_t w;
    do w = sendto(from, c.rx.p + off + 4, n, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), to_len);
    while (w < 0 && errno == EINTR);
    ok = w == ssize_t(n);
    if (ok && !self && !t_bound && named(c, src_len)) note_standin(c, t, src, src_len);
    off += 4 + n;
  }
  int e = errno;
  if (t >= 0) close(t);
  errno = e;
  return ok;
}

}  // namespace

int keep_udp_queue(Chan& c, char* msg, size_t cap) {
  c.rx.clear();
  c.src.clear();
  const bool with_src = !c.dgram_peer;
  // SO_MEMINFO's receive memory is 0 only with nothing queued (a zero-length datagram has a size too);
  // unlike a recv, asking leaves a pending ICMP error (ECONNREFUSED) for the program. Not for Unix
  // sockets: a queued datagram is charged to its sender.
  if (c.family != AF_UNIX && meminfo(c.fd, SK_MEMINFO_RMEM_ALLOC) == 0) return 0;
  int old = -1;
  socklen_t l = sizeof old;
  if (getsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &old, &l) != 0) old = -1;
  // A plain peek first: a zero-length datagram at the head that the program itself peeked is marked, and
  // a walk at an offset skips marked empty datagrams. This peek marks an empty head either way, so it is
  // kept here and the walk skips it; a non-empty head is kept by the walk.
  int off = -1;
  setsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off);
  const size_t src_before = c.src.len;
  ssize_t n = peek_record(c, with_src);
  if (n == -ECONNREFUSED || n == -EHOSTUNREACH || n == -ENETUNREACH) n = peek_record(c, with_src);  // a pending
      // ICMP error comes first and is cleared by any recv; the program does not get it (docs/channels.md)
  int rc = 0;
  if (n > 0) {
    c.rx.len -= 4 + size_t(n);  // the walk keeps it
    c.src.len = src_before;
  } else if (n < 0 && n != -EAGAIN) {
    rc = int(n);
  }
  off = 0;
  if (rc == 0 && n >= 0 && setsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) != 0) rc = -errno;
  while (rc == 0 && n >= 0) {
    ssize_t m = peek_record(c, with_src);
    if (m == -EAGAIN) break;
    if (m < 0) rc = int(m);
  }
  setsockopt(c.fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof old);
  if (rc != 0) {
    c.rx.clear();
    c.src.clear();
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
  size_t unbound = 0;
  int bind_errno = 0;
  if (c.dgram_peer && c.peer_len == c.local_len && memcmp(&c.peer, &c.local, c.local_len) == 0) {
    // Connected to itself: it is its own peer, and a second socket on its address could take the datagrams.
    if (!send_records(c, s, true, me, me_len, &unbound, &bind_errno))
      return udp_err(msg, cap, c, "cannot queue its datagrams again", errno);
    return 0;
  }
  int lock = lock_requeue();
  bool sent = send_records(c, s, false, me, me_len, &unbound, &bind_errno);
  int e = errno;
  if (lock >= 0) close(lock);
  if (!sent) return udp_err(msg, cap, c, "cannot queue its datagrams again", e);
  if (c.family != AF_UNIX) {
    // Loopback and veth deliver within sendto (a short wait covers a slower path: after the connect,
    // datagrams from another address would be dropped); a full receive buffer drops them, counted.
    for (int k = 0; k < 200 && meminfo(s, SK_MEMINFO_RMEM_ALLOC) == 0; ++k) nap_ms(5);
    if (uint32_t lost = meminfo(s, SK_MEMINFO_DROPS) - drops) {
      char what[160];
      plugins::Msg(what, sizeof what).u(lost).s(" of its ").u(want)
          .s(" queued datagrams were dropped when queued again (receive buffer)");
      return udp_err(msg, cap, c, what, ENOBUFS);
    }
  }
  if (unbound) {
    char line[420];
    plugins::Msg(line, sizeof line).s("process ").u(uint64_t(getpid())).s(" fd ").i(c.fd)
        .s(c.dgram_peer ? " (connected UDP socket): its peer's address" : " (bound datagram socket): a sender's address")
        .s(" cannot be bound here (").err(bind_errno)
        .s(bind_errno == EADDRNOTAVAIL ? "; on another host, only a transparent socket can: CAP_NET_ADMIN" : "")
        .s(bind_errno == EEXIST ? "; a Unix path name" : "")
        .s("), so ").u(unbound).s(" of its ").u(want)
        .s(" queued datagrams were queued again from another address")
        .s(c.family == AF_UNIX ? ": recvfrom reports that address for them"
                               : " (recvfrom/recvmsg report their own source all the same)");
    plugins::warn(line);
  }
  return 0;
}

bool standin_source(sockaddr* from, socklen_t len, bool peek) {
  const uint32_t n = __atomic_load_n(&g_nstandins, __ATOMIC_ACQUIRE);
  if (n == 0 || (from->sa_family != AF_INET && from->sa_family != AF_INET6)) return false;
  const uint16_t port = port_of(from);
  for (uint32_t k = 0; k < n; ++k) {
    StandIn& e = g_standins[k];
    if (e.port != port || e.fam != from->sa_family) continue;
    uint32_t left = __atomic_load_n(&e.left, __ATOMIC_ACQUIRE);
    if (left == 0) continue;  // spent: the port may be someone else's now
    if (!peek) {
      while (left > 0 && !__atomic_compare_exchange_n(&e.left, &left, left - 1, false, __ATOMIC_ACQ_REL,
                                                       __ATOMIC_ACQUIRE)) {
      }
      if (left == 0) continue;  // another thread took the last one
    }
    memcpy(from, &e.src, e.src_len < len ? e.src_len : len);
    return true;
  }
  return false;
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
