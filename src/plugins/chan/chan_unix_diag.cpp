// Unix sockets as the kernel's sock_diag netlink interface shows them (what `ss -x` shows): the peer of a
// socket by inode (nothing else names the other end of a Unix connection uniquely), its shutdown bits, and
// a listener's backlog. Raw syscalls and a stack buffer only.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/chan/chan.h"

namespace revive::chan {

int diag_request(void* req, size_t len) {
  int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (s < 0) return -1;
  sockaddr_nl nl;
  memset(&nl, 0, sizeof nl);
  nl.nl_family = AF_NETLINK;
  auto* nh = static_cast<nlmsghdr*>(req);
  nh->nlmsg_len = uint32_t(len);
  nh->nlmsg_type = SOCK_DIAG_BY_FAMILY;
  if (sendto(s, req, len, 0, reinterpret_cast<sockaddr*>(&nl), sizeof nl) != ssize_t(len)) {
    close(s);
    return -1;
  }
  return s;
}

namespace {

// Asks for socket `ino` with the attributes of `show`; calls f(attribute) for each attribute of the
// answer. False if there is no such socket or netlink failed.
template <typename F>
bool unix_diag(uint64_t ino, uint32_t show, F f) {
  struct {
    nlmsghdr nh;
    unix_diag_req req;
  } q;
  memset(&q, 0, sizeof q);
  q.nh.nlmsg_flags = NLM_F_REQUEST;
  q.req.sdiag_family = AF_UNIX;
  q.req.udiag_states = ~0u;
  q.req.udiag_ino = uint32_t(ino);
  q.req.udiag_show = show;
  q.req.udiag_cookie[0] = q.req.udiag_cookie[1] = ~0u;  // no cookie: look up by inode
  int s = diag_request(&q, sizeof q);
  if (s < 0) return false;
  bool found = false;
  alignas(8) char buf[8192];
  {
    ssize_t n = recv(s, buf, sizeof buf, 0);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); n > 0 && NLMSG_OK(h, size_t(n)); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) break;  // NLMSG_ERROR: no such socket
      found = true;
      auto* m = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      int alen = int(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
      for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) f(a);
    }
  }
  close(s);
  return found;
}

}  // namespace

uint64_t unix_peer_ino(uint64_t ino, uint8_t* shutdown) {
  uint64_t peer = 0;
  unix_diag(ino, UDIAG_SHOW_PEER, [&](const rtattr* a) {
    if (a->rta_type == UNIX_DIAG_PEER) peer = *static_cast<const uint32_t*>(RTA_DATA(a));
    else if (a->rta_type == UNIX_DIAG_SHUTDOWN && shutdown) *shutdown = *static_cast<const uint8_t*>(RTA_DATA(a));
  });
  return peer;
}

int unix_icons(uint64_t ino, uint32_t* out, int max) {
  int n = 0;
  bool ok = unix_diag(ino, UDIAG_SHOW_ICONS, [&](const rtattr* a) {
    if (a->rta_type != UNIX_DIAG_ICONS) return;
    const uint32_t* v = static_cast<const uint32_t*>(RTA_DATA(a));
    for (size_t k = 0; k < RTA_PAYLOAD(a) / sizeof(uint32_t) && n < max; ++k) out[n++] = v[k];
  });
  return ok ? n : -1;
}

}  // namespace revive::chan
