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

int rebind_datagram(Chan& c, char* msg, size_t cap) {
  int s = socket(c.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return dg_err(msg, cap, c, "socket", errno);
  if (!bind_again(c, s)) {
    int e = errno;
    close(s);
    if (!(e == EADDRNOTAVAIL && c.family != AF_UNIX)) return dg_err(msg, cap, c, "cannot bind its name again", e);
    // Its address is not on this host (restarted on another one): the same port on every address (the
    // senders' datagrams to its old address are sent there: chan_portmap.cpp).
    if (int rc = rebind_elsewhere(c, &s, msg, cap)) return rc;
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
