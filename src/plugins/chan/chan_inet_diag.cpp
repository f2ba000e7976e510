// A TCP connection's shutdown bits as the kernel's inet_diag shows them (INET_DIAG_SHUTDOWN, what `ss`
// prints as "-->"/"<--"): nothing else tells whether this end shut its receiving side (shutdown(SHUT_RD)
// changes no TCP state and sends nothing). Exact lookup by the connection's addresses; raw syscalls and
// a stack buffer only.
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/chan/chan.h"

namespace revive::chan {

int tcp_shutdown_bits(const sockaddr_storage& local, const sockaddr_storage& peer) {
  const int family = local.ss_family;
  if ((family != AF_INET && family != AF_INET6) || peer.ss_family != family) return -1;
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } q;
  memset(&q, 0, sizeof q);
  q.nh.nlmsg_flags = NLM_F_REQUEST;  // no NLM_F_DUMP: the one socket with these addresses
  q.req.sdiag_family = uint8_t(family);
  q.req.sdiag_protocol = IPPROTO_TCP;
  q.req.idiag_states = ~0u;
  q.req.id.idiag_cookie[0] = q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  auto ids = [&q](in_port_t lport, in_port_t pport, const void* laddr, const void* paddr, size_t n) {
    q.req.id.idiag_sport = lport;
    q.req.id.idiag_dport = pport;
    memcpy(q.req.id.idiag_src, laddr, n);
    memcpy(q.req.id.idiag_dst, paddr, n);
  };
  const auto& l4 = reinterpret_cast<const sockaddr_in&>(local);
  const auto& p4 = reinterpret_cast<const sockaddr_in&>(peer);
  const auto& l6 = reinterpret_cast<const sockaddr_in6&>(local);
  const auto& p6 = reinterpret_cast<const sockaddr_in6&>(peer);
  if (family == AF_INET) ids(l4.sin_port, p4.sin_port, &l4.sin_addr, &p4.sin_addr, 4);
  else ids(l6.sin6_port, p6.sin6_port, &l6.sin6_addr, &p6.sin6_addr, 16);
  int s = diag_request(&q, sizeof q);
  if (s < 0) return -1;
  int bits = -1;
  alignas(8) char buf[4096];
  ssize_t n = recv(s, buf, sizeof buf, 0);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); n > 0 && NLMSG_OK(h, size_t(n)); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) break;  // NLMSG_ERROR: no such connection
    auto* m = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
    int alen = int(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
    for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
      if (a->rta_type == INET_DIAG_SHUTDOWN) bits = *static_cast<const uint8_t*>(RTA_DATA(a));
    break;
  }
  close(s);
  return bits;
}

}  // namespace revive::chan
