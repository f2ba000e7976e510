// The peer of a Unix socket, by inode, from the kernel's sock_diag netlink interface (what `ss -x` shows):
// nothing else names the other end of a Unix connection uniquely. Raw syscalls and a stack buffer only.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/chan/chan.h"

namespace revive::chan {

uint64_t unix_peer_ino(uint64_t ino, uint8_t* shutdown) {
  int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (s < 0) return 0;
  struct {
    nlmsghdr nh;
    unix_diag_req req;
  } q;
  memset(&q, 0, sizeof q);
  q.nh.nlmsg_len = sizeof q;
  q.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.nh.nlmsg_flags = NLM_F_REQUEST;
  q.req.sdiag_family = AF_UNIX;
  q.req.udiag_states = ~0u;
  q.req.udiag_ino = uint32_t(ino);
  q.req.udiag_show = UDIAG_SHOW_PEER;
  q.req.udiag_cookie[0] = q.req.udiag_cookie[1] = ~0u;  // no cookie: look up by inode
  sockaddr_nl nl;
  memset(&nl, 0, sizeof nl);
  nl.nl_family = AF_NETLINK;
  uint64_t peer = 0;
  alignas(8) char buf[8192];
  if (sendto(s, &q, sizeof q, 0, reinterpret_cast<sockaddr*>(&nl), sizeof nl) == ssize_t(sizeof q)) {
    ssize_t n = recv(s, buf, sizeof buf, 0);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); n > 0 && NLMSG_OK(h, size_t(n)); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) break;  // NLMSG_ERROR: no such socket
      auto* m = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      int alen = int(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
      for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
        if (a->rta_type == UNIX_DIAG_PEER) peer = *static_cast<uint32_t*>(RTA_DATA(a));
        else if (a->rta_type == UNIX_DIAG_SHUTDOWN && shutdown) *shutdown = *static_cast<uint8_t*>(RTA_DATA(a));
    }
  }
  close(s);
  return peer;
}

}  // namespace revive::chan
