// Datagram sockets bound to a name and not connected (UCX's Unix sockets on abstract names, which Open
// MPI's osc/ucx and MPICH's ch4:ucx ranks send to each other; UDP sockets bound to a port). Any process
// may send to the name, so there is no pair to rebuild: the restored process binds the same name again
// (an abstract name or a port is free once the killed process is gone; a socket file it left is removed
// first). The datagrams waiting in the queue are part of the checkpoint: peeked at save with their
// sources (every sender of the computation is suspended, so nothing is added meanwhile; the original run
// keeps its queue untouched), kept in memory the image carries, and queued on the new socket at restore,
// in order, each from its own source's address where that can be bound (chan_udp.cpp, which does the
// same for a connected UDP socket: bound, its queue put back from its peer's address, then connected).
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

int dg_err(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (bound datagram socket): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

}  // namespace

bool bound_name(int family, const sockaddr_storage& a, socklen_t len) {
  if (family == AF_UNIX) return len > sizeof(sa_family_t);  // a path or an abstract name
  if (family == AF_INET) return reinterpret_cast<const sockaddr_in&>(a).sin_port != 0;
  return family == AF_INET6 && reinterpret_cast<const sockaddr_in6&>(a).sin6_port != 0;
}

int keep_datagrams(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kDgramBound) continue;
    if (int rc = keep_udp_queue(c, msg, cap)) return rc;
  }
  return 0;
}

namespace {

// The warning of a UDP socket bound to another port than the program's (virt): again, as at the last restart.
void say_moved(const Chan& c, uint16_t virt, uint16_t real, bool again, bool pair) {
  char line[300];
  plugins::Msg m(line, sizeof line);
  m.s("fd ").i(c.fd).s(": UDP port ").u(virt).s(again ? " is still" : " is").s(" taken by another program; bound to port ")
      .u(real).s(again ? " again" : " instead");
  if (pair) m.s(" (its peer in the computation connects to it there)");
  else m.s(" (the computation's datagrams to port ").u(virt).s(" on this host are sent there)");
  plugins::warn(line);
}

// A bound, unconnected UDP socket whose port another program took (an outgoing socket handed it as an
// ephemeral port, a service started meanwhile): a new port of the same address, without SO_REUSEADDR
// before the bind (the kernel then picks one nobody has bound), the option after (as the program's
// restored sockets have it). The computation's datagrams to the old port on this host are sent there
// (chan_portmap.cpp); a socket connected to a peer of the computation (pair) gets its peer connected to
// the new port (udp_publish names it). *s: a fresh socket on success.
int rebind_moved(Chan& c, int* s, uint16_t virt, bool pair, char* msg, size_t cap) {
  int e = EADDRINUSE;
  for (int attempt = 0; attempt < 8; ++attempt) {
    int t = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (t < 0) return dg_err(msg, cap, c, "socket", errno);
    if (c.family == AF_INET6) setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &c.v6only, sizeof c.v6only);
    sockaddr_storage fresh = c.local;
    reinterpret_cast<sockaddr_in&>(fresh).sin_port = 0;
    if (bind(t, reinterpret_cast<const sockaddr*>(&fresh), c.local_len) != 0) {
      e = errno;
      close(t);
      continue;
    }
    int one = 1;
    setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage now{};
    socklen_t l = sizeof now;
    getsockname(t, reinterpret_cast<sockaddr*>(&now), &l);
    say_moved(c, virt, port_of(now), false, pair);
    *s = t;
    return 0;
  }
  char what[160];
  plugins::Msg(what, sizeof what).s("UDP port ").u(virt).s(" is taken, and no new port could be bound");
  return dg_err(msg, cap, c, what, e);
}

}  // namespace

int rebind_datagram(Chan& c, char* msg, size_t cap) {
  const bool inet = c.family == AF_INET || c.family == AF_INET6;
  // Others send to it by its port: one another program took may move (chan_portmap.cpp), unless the
  // restart asks for the program's own ports (REVIVE_KEEP_PORTS=1: a taken one fails the restart).
  const char* keep_env = inject::restart_env("REVIVE_KEEP_PORTS");
  // A socket connected to a peer of the computation is connected again in udp_connect, to the address its
  // peer publishes: it may move too. One connected to an outsider may not (the outsider sends to P).
  const bool pair = udp_deferred(c) && inject::coord_configured();
  const bool movable = inet && (pair || !c.dgram_peer) && inject::coord_configured() &&
                       !(keep_env && keep_env[0] == '1');
  // The program's port: its own, or the one an earlier restart moved it from (tried first, no waiting:
  // free again, the translation ends).
  const uint16_t moved_from = inet ? portmap_virtual(c) : 0;
  const uint16_t virt = moved_from ? moved_from : inet ? port_of(c.local) : 0;
  int s = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return dg_err(msg, cap, c, "socket", errno);
  bool bound = false;
  if (moved_from && moved_from != port_of(c.local)) {
    sockaddr_storage own = c.local;
    reinterpret_cast<sockaddr_in&>(own).sin_port = htons(moved_from);
    bound = bind_again(c, s, &own, 0);
    if (!bound) {
      close(s);
      s = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (s < 0) return dg_err(msg, cap, c, "socket", errno);
    }
  }
  bool moved_now = false;
  if (!bound && !bind_again(c, s, nullptr, movable ? 250 : -1)) {
    int e = errno;
    close(s);
    if (e == EADDRINUSE && movable) {
      if (int rc = rebind_moved(c, &s, virt, pair, msg, cap)) return rc;
      moved_now = true;
    } else if (!(e == EADDRNOTAVAIL && c.family != AF_UNIX)) {
      return dg_err(msg, cap, c, "cannot bind its name again", e);
    } else if (int rc = rebind_elsewhere(c, &s, msg, cap)) {
      // Its address is not on this host (restarted on another one): the same port on every address (the
      // senders' datagrams to its old address are sent there: chan_portmap.cpp).
      return rc;
    }
  }
  if (movable) {
    // Where the program's port is served now (its own port: no translation) — noted once s is at c.fd.
    sockaddr_storage now{};
    socklen_t l = sizeof now;
    getsockname(s, reinterpret_cast<sockaddr*>(&now), &l);
    if (!moved_now && port_of(now) != virt) say_moved(c, virt, port_of(now), true, pair);  // its own still taken
    if (pair) {  // udp_connect gets its queue back and connects it
      if (int rc = place_socket(c, s, msg, cap)) return rc;
      portmap_note(c.fd, virt, port_of(now));
      return 0;
    }
    if (int rc = requeue_udp(c, s, msg, cap)) {
      close(s);
      return rc;
    }
    if (int rc = place_socket(c, s, msg, cap)) return rc;
    portmap_note(c.fd, virt, port_of(now));
    return 0;
  }
  if (udp_deferred(c) && inject::coord_configured()) return place_socket(c, s, msg, cap);  // udp_connect
  if (c.dgram_peer) {
    // Its queue first, while any address may still send to it: the kernel keeps it across connect().
    if (int rc = requeue_udp(c, s, msg, cap)) {
      close(s);
      return rc;
    }
    if (connect(s, reinterpret_cast<const sockaddr*>(&c.peer), c.peer_len) != 0) {
      int e = errno;
      close(s);
      return dg_err(msg, cap, c, "cannot connect it to its peer again", e);
    }
    return place_socket(c, s, msg, cap);
  }
  if (int rc = requeue_udp(c, s, msg, cap)) {
    close(s);
    return rc;
  }
  return place_socket(c, s, msg, cap);
}

}  // namespace revive::chan
