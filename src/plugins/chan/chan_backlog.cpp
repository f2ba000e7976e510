// Connections still in a listener's backlog at checkpoint (connect() done, accept() not yet called):
// their bytes sit in a socket no process holds, so neither end can drain them. The listener's process
// finds them (sock_diag), accepts them at save (after the fd plugin's save, so the descriptors never
// reach the image) and drains them like any connection; then it hands each client the bytes the client
// had sent and closes its end. The client, at resume (or on restart, in reconnect), connects to the
// listener again and re-sends them: the program's accept() returns the connection and reads every byte
// once. A backlog is taken over only if every connection in it comes from the computation (an outside
// client could not be told to reconnect); otherwise it is left alone.
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr int kTimeoutMs = 60000;
constexpr int kMaxPending = 64;

// The backlog connections found in the drain phase, by name (as the listener's end would be named).
struct Pending {
  uint32_t listener;  // table index
  char key[80], peer_key[80];
};
Pending g_pend[kMaxPending];
uint32_t g_npend;

void name(char* out, size_t cap, const char* prefix, uint64_t gen, const char* key) {
  plugins::Msg(out, cap).s(prefix).u(gen).s(".").s(key);
}

// The listener's backlog as (key, peer key) pairs, into g_pend from index `from`; count or -1.
int list_backlog(uint32_t li, uint32_t from) {
  const Chan& l = g_chans[li];
  Chan tmp;
  int n = 0;
  if (l.family == AF_UNIX) {
    struct stat st;
    uint32_t icons[kMaxPending];
    if (fstat(l.fd, &st) != 0) return -1;
    int k = unix_icons(st.st_ino, icons, kMaxPending);
    for (int j = 0; j < k && from + uint32_t(n) < kMaxPending; ++j) {
      // The queued connection has no inode yet (0): the client names it (client inode, 0).
      uint64_t me = 0, peer = icons[j];
      make_keys(tmp, reinterpret_cast<const uint8_t*>(&me), 8, reinterpret_cast<const uint8_t*>(&peer), 8);
      Pending& p = g_pend[from + uint32_t(n++)];
      p.listener = li;
      memcpy(p.key, tmp.key, sizeof p.key);
      memcpy(p.peer_key, tmp.peer_key, sizeof p.peer_key);
    }
    return k < 0 ? -1 : n;
  }
  sockaddr_storage local[kMaxPending], peer[kMaxPending];
  int k = tcp_pending(l, local, peer, kMaxPending);
  for (int j = 0; j < k && from + uint32_t(n) < kMaxPending; ++j) {
    uint8_t a[18], b[18];
    size_t la = addr_key(local[j], a), lb = addr_key(peer[j], b);
    make_keys(tmp, a, la, b, lb);
    Pending& p = g_pend[from + uint32_t(n++)];
    p.listener = li;
    memcpy(p.key, tmp.key, sizeof p.key);
    memcpy(p.peer_key, tmp.peer_key, sizeof p.peer_key);
  }
  return n;
}

// An inet_diag address (network byte order) as a sockaddr.
void inet_sockaddr(sockaddr_storage& a, int family, uint16_t port, const uint32_t* addr) {
  memset(&a, 0, sizeof a);
  if (family == AF_INET) {
    auto& x = reinterpret_cast<sockaddr_in&>(a);
    x.sin_family = AF_INET;
    x.sin_port = port;
    memcpy(&x.sin_addr, addr, 4);
  } else {
    auto& x = reinterpret_cast<sockaddr_in6&>(a);
    x.sin6_family = AF_INET6;
    x.sin6_port = port;
    memcpy(&x.sin6_addr, addr, 16);
  }
}

bool soft(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EINTR); }

int fail(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (backlog connection): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

}  // namespace

int tcp_pending(const Chan& c, sockaddr_storage* local, sockaddr_storage* peer, int max) {
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } q;
  memset(&q, 0, sizeof q);
  q.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  q.req.sdiag_family = uint8_t(c.family);
  q.req.sdiag_protocol = IPPROTO_TCP;
  q.req.idiag_states = (1u << TCP_ESTABLISHED) | (1u << TCP_CLOSE_WAIT);
  int s = diag_request(&q, sizeof q);
  if (s < 0) return -1;
  const sockaddr_in& l4 = reinterpret_cast<const sockaddr_in&>(c.local);
  const sockaddr_in6& l6 = reinterpret_cast<const sockaddr_in6&>(c.local);
  const in_port_t port = l4.sin_port;  // same offset in sockaddr_in6
  const bool any = c.family == AF_INET ? l4.sin_addr.s_addr == 0 : memcmp(&l6.sin6_addr, &in6addr_any, 16) == 0;
  int n = 0;
  bool done = false;
  alignas(8) char buf[8192];
  while (!done) {
    ssize_t got = recv(s, buf, sizeof buf, 0);
    if (got <= 0) break;
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, size_t(got)); h = NLMSG_NEXT(h, got)) {
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) {  // NLMSG_DONE or an error
        done = true;
        break;
      }
      auto* m = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
      // Not accepted yet: no socket file, so no inode. Ours: same local port (and address unless the
      // listener is bound to the wildcard address).
      if (m->idiag_inode != 0 || m->id.idiag_sport != port || n >= max) continue;
      sockaddr_storage a, b;
      inet_sockaddr(a, c.family, m->id.idiag_sport, m->id.idiag_src);
      inet_sockaddr(b, c.family, m->id.idiag_dport, m->id.idiag_dst);
      if (!any && !(c.family == AF_INET ? reinterpret_cast<sockaddr_in&>(a).sin_addr.s_addr == l4.sin_addr.s_addr
                                        : memcmp(&reinterpret_cast<sockaddr_in6&>(a).sin6_addr, &l6.sin6_addr, 16) == 0))
        continue;
      local[n] = a;
      peer[n++] = b;
    }
  }
  close(s);
  return n;
}

void publish_backlogs(uint64_t gen) {
  g_npend = 0;
  char key[128];
  for (uint32_t i = 0; i < g_nchans; ++i) {
    if (g_chans[i].kind != kListen) continue;
    int n = list_backlog(i, g_npend);
    for (int j = 0; j < n; ++j) {
      name(key, sizeof key, "chanb.", gen, g_pend[g_npend + uint32_t(j)].key);
      inject::coord_publish(key, "1");
    }
    if (n > 0) g_npend += uint32_t(n);
  }
}

int backlog_accept(uint64_t gen, char* msg, size_t cap) {
  char key[128], val[32];
  for (uint32_t i = 0; i < g_nchans; ++i) {
    if (g_chans[i].kind != kListen) continue;
    uint32_t first = 0, n = 0;  // publish_backlogs listed each listener's connections together
    while (first < g_npend && g_pend[first].listener != i) ++first;
    while (first + n < g_npend && g_pend[first + n].listener == i) ++n;
    if (n == 0) continue;
    // Taken over only if every connection is a client of the computation and the backlog is still the
    // one announced (an outside process may have connected meanwhile).
    bool ok = true;
    for (uint32_t j = first; j < first + n && ok; ++j) {
      name(key, sizeof key, "chan.", gen, g_pend[j].peer_key);
      int r = inject::coord_lookup(key, false, 10000, val, sizeof val);
      if (r < 0) return fail(msg, cap, g_chans[i], "coordinator lost", EIO);
      ok = r == 1;
    }
    if (ok && g_npend + n <= kMaxPending) {
      int again = list_backlog(i, g_npend);
      ok = again == int(n);
      for (uint32_t j = 0; ok && j < n; ++j) ok = strcmp(g_pend[g_npend + j].key, g_pend[first + j].key) == 0;
    }
    for (uint32_t j = first; j < first + n; ++j) {
      name(key, sizeof key, "chanbd.", gen, g_pend[j].key);
      if (!inject::coord_publish(key, ok ? "1" : "0")) return fail(msg, cap, g_chans[i], "cannot publish", EIO);
    }
    for (uint32_t j = 0; ok && j < n; ++j) {
      int s = accept4(g_chans[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (s < 0) return fail(msg, cap, g_chans[i], "cannot accept a connection of its backlog", errno);
      if (!add_socket(s)) {
        close(s);
        return fail(msg, cap, g_chans[i], "no room for a connection of its backlog", ENOSPC);
      }
      Chan& c = g_chans[g_nchans - 1];
      c.kind = kConn;
      c.backlog = 1;
    }
  }
  return 0;
}

int backlog_join(uint64_t gen, Chan& c, char* msg, size_t cap) {
  char key[128], val[16];
  name(key, sizeof key, "chanb.", gen, c.peer_key);
  int r = inject::coord_lookup(key, false, 10000, val, sizeof val);
  if (r == 1) {  // in an internal listener's backlog: its process decides at save (it never waits on us)
    name(key, sizeof key, "chanbd.", gen, c.peer_key);
    r = inject::coord_lookup(key, true, kTimeoutMs, val, sizeof val);
    if (r != 1) return fail(msg, cap, c, "the listener's process did not say whether it takes the connection", ETIMEDOUT);
    if (strcmp(val, "1") == 0) {
      c.kind = kConn;
      c.backlog = 2;
    }
  }
  return r < 0 ? fail(msg, cap, c, "coordinator lost", EIO) : 0;
}

int backlog_transfer(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    c.sent = c.got = 0;
    c.want = 0;
    c.done = c.kind != kConn || !c.backlog;
    if (c.backlog == 2 && c.rx.len != 0)  // the program never accepted it, so it cannot have written
      return fail(msg, cap, c, "data from a connection nobody accepted", EPROTO);
  }
  const uint64_t deadline = now_ms() + kTimeoutMs;
  for (;;) {
    bool all = true;
    for (uint32_t i = 0; i < g_nchans; ++i) {
      Chan& c = g_chans[i];
      if (c.done) continue;
      if (c.backlog == 1) {  // listener side: [u64 n][the n bytes the client sent], then close
        const uint64_t n = c.rx.len;
        while (c.sent < 8 + n) {
          const uint8_t* p = c.sent < 8 ? reinterpret_cast<const uint8_t*>(&n) + c.sent : c.rx.p + (c.sent - 8);
          ssize_t w = send(c.fd, p, c.sent < 8 ? 8 - c.sent : 8 + n - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
          if (soft(w)) break;
          if (w <= 0) return fail(msg, cap, c, "cannot hand the client its bytes", errno);
          c.sent += size_t(w);
        }
        if (c.sent == 8 + n) {
          close(c.fd);
          c.fd = -1;
          c.kind = kGone;
          c.rx.clear();
          c.done = true;
        }
      } else {  // client side: exactly the header's count of bytes, into rx
        for (;;) {
          ssize_t r;
          if (c.got < 8) {
            r = recv(c.fd, reinterpret_cast<uint8_t*>(&c.want) + c.got, 8 - c.got, MSG_DONTWAIT);
          } else {
            if (c.got == 8 + c.want) break;
            if (c.want > (uint64_t(1) << 40) || !c.rx.reserve(c.want - c.rx.len))
              return fail(msg, cap, c, "cannot hold the bytes to send again", ENOMEM);
            r = recv(c.fd, c.rx.p + c.rx.len, c.want - c.rx.len, MSG_DONTWAIT);
            if (r > 0) c.rx.len += size_t(r);
          }
          if (soft(r)) break;
          if (r <= 0) return fail(msg, cap, c, "the listener's process did not hand the bytes back", r == 0 ? EPIPE : errno);
          c.got += size_t(r);
        }
        if (c.got >= 8 && c.got == 8 + c.want) {
          c.kind = kBacklog;
          c.done = true;
        }
      }
      all = all && c.done;
    }
    if (all) return 0;
    if (now_ms() > deadline) return -ETIMEDOUT;
    for (uint32_t i = 0; i < g_nchans; ++i)
      if (!g_chans[i].done) {
        wait_fd(g_chans[i].fd, g_chans[i].backlog == 1 ? POLLOUT : POLLIN, 5);
        break;
      }
  }
}

int backlog_reconnect(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kBacklog) continue;
    int s = socket(c.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail(msg, cap, c, "socket", errno);
    // Room for all the bytes in our own buffer: the program that will accept the connection is held.
    int want = int(2 * c.rx.len + (1 << 16));
    if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) != 0)
      setsockopt(s, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
    // The listener's port may have been taken meanwhile, the listener moved (chan_portmap.cpp).
    sockaddr_storage to = c.peer;
    portmap_retarget(&to);
    if (connect(s, reinterpret_cast<sockaddr*>(&to), c.peer_len) != 0) {
      int e = errno;
      close(s);
      return fail(msg, cap, c, "cannot connect to the listener again", e);
    }
    if (int rc = place_socket(c, s, msg, cap)) return rc;
    const uint64_t deadline = now_ms() + kTimeoutMs;
    for (size_t off = 0; off < c.rx.len;) {
      ssize_t w = send(c.fd, c.rx.p + off, c.rx.len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        off += size_t(w);
      } else if (soft(w) && now_ms() < deadline) {
        wait_fd(c.fd, POLLOUT, 100);
      } else {
        return fail(msg, cap, c, "cannot send its bytes again", w < 0 ? errno : ETIMEDOUT);
      }
    }
    c.rx.clear();
  }
  return 0;
}

}  // namespace revive::chan
