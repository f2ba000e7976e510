// Finds this process's TCP sockets (listening and connected) by listing /proc/self/fd, with raw syscalls
// only (user threads are held while this runs).
#include <fcntl.h>
#include <netinet/tcp.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <poll.h>
#include <unistd.h>
#include <errno.h>

#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"
#include "plugins/common/proc_fds.h"
#include "plugins/common/sockopt.h"
#include "plugins/plugins.h"

namespace revive::chan {

Chan g_chans[kMaxChans];
uint32_t g_nchans;
bool g_drained;
bool g_drain_ran;
uint64_t g_gen;
int g_pty_dropped = -1;

bool Bytes::reserve(size_t n) {
  if (len + n <= cap) return true;
  size_t nc = cap ? cap : 1 << 16;
  while (nc < len + n) nc *= 2;
  void* q = p ? mremap(p, cap, nc, MREMAP_MAYMOVE) : mmap(nullptr, nc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED) return false;
  p = static_cast<uint8_t*>(q);
  cap = nc;
  return true;
}

size_t addr_len(int family) { return family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6); }

void hex(char* out, size_t cap, const void* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  const uint8_t* b = static_cast<const uint8_t*>(p);
  size_t o = 0;
  for (size_t i = 0; i < n && o + 2 < cap; ++i) {
    out[o++] = kDigits[b[i] >> 4];
    out[o++] = kDigits[b[i] & 15];
  }
  if (cap) out[o] = 0;
}

void unhex(const char* s, uint8_t* out, size_t cap, size_t* n) {
  auto v = [](char ch) { return ch >= 'a' ? ch - 'a' + 10 : ch - '0'; };
  size_t i = 0;
  for (; s[0] && s[1] && i < cap; s += 2) out[i++] = uint8_t(v(s[0]) << 4 | v(s[1]));
  *n = i;
}

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

int wait_fd(int fd, short events, int ms) {
  pollfd p = {fd, events, 0};
  int r = poll(&p, 1, ms);
  return r < 0 ? -errno : r;
}

// The address part of an inet socket name as key material: IPv4 address+port, or IPv6 address+port.
size_t addr_key(const sockaddr_storage& ss, uint8_t* out) {
  if (ss.ss_family == AF_INET) {
    const sockaddr_in& v4 = reinterpret_cast<const sockaddr_in&>(ss);
    memcpy(out, &v4.sin_addr, 4);
    memcpy(out + 4, &v4.sin_port, 2);
    return 6;
  }
  const sockaddr_in6& a = reinterpret_cast<const sockaddr_in6&>(ss);
  memcpy(out, &a.sin6_addr, 16);
  memcpy(out + 16, &a.sin6_port, 2);
  return 18;
}

// This end's name is (local, peer), the other end's is (peer, local); the smaller one listens on restart.
void make_keys(Chan& c, const uint8_t* a, size_t la, const uint8_t* b, size_t lb) {
  uint8_t k[40];
  memcpy(k, a, la);
  memcpy(k + la, b, lb);
  hex(c.key, sizeof c.key, k, la + lb);
  memcpy(k, b, lb);
  memcpy(k + lb, a, la);
  hex(c.peer_key, sizeof c.peer_key, k, la + lb);
  c.acceptor = strcmp(c.key, c.peer_key) < 0;
}

namespace {

using plugins::int_opt;

// One descriptor: a stream socket goes into the table (slot reused: the buffers stay mapped across
// checkpoints), anything else is the fd plugin's.
bool consider(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || inject::fd_reserved(fd) || inject::fd_owned_by_plugin(fd)) return false;
  if (g_nchans >= kMaxChans) {
    // A pty master left out would come back as a fresh, unrelated master: a standalone checkpoint
    // refuses it (classify_ptys_alone); a coordinated one is refused by the fd plugin (revive_chan_takes).
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 2) && g_pty_dropped < 0) g_pty_dropped = fd;
    return false;
  }
  if (S_ISFIFO(st.st_mode)) {
    Chan& c = g_chans[g_nchans];
    if (consider_fifo(fd, c)) ++g_nchans;
    return false;
  }
  if (S_ISCHR(st.st_mode)) {
    Chan& c = g_chans[g_nchans];
    if (consider_pty(fd, st, c)) ++g_nchans;
    return false;
  }
  if (!S_ISSOCK(st.st_mode)) return false;
  int family = int_opt(fd, SOL_SOCKET, SO_DOMAIN), type = int_opt(fd, SOL_SOCKET, SO_TYPE);
  if ((family != AF_INET && family != AF_INET6 && family != AF_UNIX) ||
      (type != SOCK_STREAM && type != SOCK_DGRAM && !(family == AF_UNIX && type == SOCK_SEQPACKET)))
    return false;
  Chan& c = g_chans[g_nchans];
  reset_slot(c);
  c.fd = fd;
  c.family = family;
  c.type = type;
  c.flags = fcntl(fd, F_GETFL);
  c.cloexec = (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
  c.nodelay = family != AF_UNIX && int_opt(fd, IPPROTO_TCP, TCP_NODELAY) > 0;
  c.v6only = family == AF_INET6 && int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY) > 0;
  // A killed process's TCP connections linger in TIME_WAIT under the listener's port, and Linux lets the
  // restored listener bind it again only if those connections had SO_REUSEADDR as well (the TIME_WAIT
  // entry keeps the flag of its socket). Listeners without it (Open MPI's) would then fail with
  // EADDRINUSE for a minute. Setting it now, on every TCP socket we checkpoint, changes nothing else the
  // program can observe except getsockopt(SO_REUSEADDR) itself (docs/channels.md).
  if (family != AF_UNIX) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  c.listen_fd = c.share_fd = -1;
  c.ino = st.st_ino;
  // A dup of a socket already in the table (the same inode is the same open file description: a socket
  // cannot be opened again): that entry alone drains and rebuilds it; this number gets its socket back.
  for (uint32_t j = 0; j < g_nchans; ++j) {
    const Chan& o = g_chans[j];
    if (o.ino != c.ino || o.alias == 1 || (o.kind != kListen && o.kind != kOutside && o.kind != kConn && o.kind != kDgramBound)) continue;
    c.kind = kAlias;
    c.alias = 1;
    c.alias_of = j;
    ++g_nchans;
    return true;
  }
  socklen_t l = sizeof c.local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&c.local), &l) != 0) return false;
  c.local_len = l;
  if (type == SOCK_DGRAM) {
    // Not connected, but bound to a name others send to: rebound with its queue (chan_dgram_name.cpp).
    // A connected UDP socket too (its port is bound, autobound at connect): when several processes hold
    // it (inherited by fork), each making its own bound the same port twice and the second failed the
    // restart; as a kDgramBound it is elected and made once, then handed over (chan_shared.cpp).
    // Connected Unix pairs go on below; a nameless one stays the fd plugin's.
    socklen_t pl = sizeof c.peer;
    bool connected = getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &pl) == 0;
    if (bound_name(family, c.local, l) && (!connected || family != AF_UNIX)) {
      c.kind = kDgramBound;
      if (!connected && family != AF_UNIX) portmap_origin();  // others send to it at this host's addresses
      c.dgram_peer = connected;
      c.peer_len = connected ? pl : 0;
      socklen_t bl = sizeof c.rcvbuf;
      if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &c.rcvbuf, &bl) != 0) c.rcvbuf = 0;
      if (connected) {  // named by its addresses, as a TCP connection: its peer may be in the computation
        uint8_t ka[18], kb[18];
        size_t la = addr_key(c.local, ka), lb = addr_key(c.peer, kb);
        make_keys(c, ka, la, kb, lb);
      }
      ++g_nchans;
      return true;
    }
    if (family != AF_UNIX) return false;
  }
  if (int_opt(fd, SOL_SOCKET, SO_ACCEPTCONN) == 1) {
    // A Unix listener without a name cannot be reached by anyone: leave it to the fd plugin.
    if (family == AF_UNIX && l <= sizeof(sa_family_t)) return false;
    c.kind = kListen;
    if (family == AF_INET || family == AF_INET6) portmap_origin();
    ++g_nchans;
    return true;
  }
  if (family == AF_UNIX) {
    // Unix ends have no addresses that tell connections apart: the pair of socket inodes does.
    uint8_t shut = 0;
    uint64_t me = st.st_ino, peer = unix_peer_ino(me, &shut);
    l = sizeof c.peer;  // the listener's name, should the connection still be in its backlog
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &l) == 0) c.peer_len = l;
    // A connected end whose peer has no inode is still in a listener's backlog (the peer gets its
    // socket file at accept), named (own inode, 0) like the listener names it; else not connected.
    if (!peer && (type == SOCK_DGRAM || c.peer_len <= sizeof(sa_family_t))) return false;  // the fd plugin's
    c.wr_shut = (shut & 2) != 0;  // SEND_SHUTDOWN
    // RCV_SHUTDOWN: our own shutdown(SHUT_RD) or the peer's SHUT_WR, which a Unix connection cannot tell
    // apart (either sets our RCV and the peer's SEND bit). This end shuts its receiving side again after
    // the rebuild either way: were it left to the peer, our program could resume before the peer got
    // there and read "nothing yet" instead of end of file.
    c.rd_shut = (shut & 1) != 0;
    make_keys(c, reinterpret_cast<const uint8_t*>(&me), 8, reinterpret_cast<const uint8_t*>(&peer), 8);
  } else {
    l = sizeof c.peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &l) != 0) return false;  // unconnected: fd plugin
    c.peer_len = l;
    uint8_t a[18], b[18];
    size_t la = addr_key(c.local, a), lb = addr_key(c.peer, b);
    make_keys(c, a, la, b, lb);
    // Our FIN is out once we shut the writing side: FIN_WAIT1/2, CLOSING, or LAST_ACK (the peer's came first).
    tcp_info ti;
    socklen_t tl = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) {
      c.wr_shut = ti.tcpi_state == TCP_FIN_WAIT1 || ti.tcpi_state == TCP_FIN_WAIT2 ||
                  ti.tcpi_state == TCP_CLOSING || ti.tcpi_state == TCP_LAST_ACK;
      // Our receiving side is shut (RCV_SHUTDOWN) while the peer's FIN has not come: shutdown(SHUT_RD).
      if (!tcp_fin_in(ti.tcpi_state)) {
        int bits = tcp_shutdown_bits(c.local, c.peer);
        c.rd_shut = bits > 0 && (bits & 1);
      }
    }
  }
  c.kind = kOutside;  // until its peer shows up in the drain phase
  ++g_nchans;
  return true;
}


}  // namespace

void reset_slot(Chan& c) {
  Bytes rx = c.rx, back = c.back;
  memset(&c, 0, sizeof c);
  c.rx = rx;
  c.back = back;
  c.rx.clear();
  c.back.clear();
}

bool add_socket(int fd) { return consider(fd) && g_chans[g_nchans - 1].fd == fd; }

int each_fd(void (*f)(int fd, void* arg), void* arg) {
  int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -errno;
  alignas(8) char buf[4096];
  for (;;) {
    long got = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (got <= 0) break;
    for (long off = 0; off < got;) {
      auto* d = reinterpret_cast<plugins::Dirent64*>(buf + off);
      off += d->reclen;
      if (d->name[0] < '0' || d->name[0] > '9') continue;
      int fd = 0;
      for (const char* s = d->name; *s; ++s) fd = fd * 10 + (*s - '0');
      if (fd != dir) f(fd, arg);
    }
  }
  close(dir);
  return 0;
}

int scan(char* msg, size_t cap) {
  g_nchans = 0;
  g_pty_dropped = -1;
  int rc = each_fd([](int fd, void*) { consider(fd); }, nullptr);
  if (rc < 0) plugins::Msg(msg, cap).s("cannot list /proc/self/fd: ").err(-rc);
  return rc;
}

}  // namespace revive::chan
