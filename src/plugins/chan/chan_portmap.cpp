// Listener ports another program took (docs/channels.md "A listener's port taken"). A restored TCP listener
// binds its old port again; when another program of the machine took that port between the kill and the
// restart (an ephemeral port handed to someone's outgoing connection, a service started meanwhile), the
// restart used to fail ("cannot listen again on port P"). Now it listens on a new port Q of the same
// address and the computation's connects to P on this host go to Q:
//  - restore (relisten): the move is noted (fd, socket inode, P, Q) in a table kept in process memory, so
//    the next checkpoint still knows that the program's P is this socket (its getsockname says Q);
//  - reconnect phase: every restored TCP listener publishes "lport.<G>.<host>.<P>" = Q (Q = P when it got
//    its port back); <host> is this kernel's boot id and network namespace, the space ports live in;
//  - refill phase: every restored process reads this host's moved ports into its own table;
//  - connect(): a TCP connect to a moved port at an address of this host (loopback, any, or one of its
//    interfaces' IPv4 addresses) is sent to the new port. Programs keep P in their memory (MPI's business
//    card, a client's configuration): nothing else of theirs changes.
//  - a program exec'd after the restart gets the routes in REVIVE_PORTMAP (proctree's exec wrappers ask
//    revive_chan_portmap_env below) and reads them at its first connect.
// Not covered: listeners bound to an address of another host (a restart elsewhere keeps
// the port or fails as before), UDP sockets. IPv6 addresses of this host's interfaces are read from
// /proc/net/if_inet6 (since 2026-11-29; before, only ::1, :: and IPv4-mapped local addresses counted).
// The wrapper runs in program threads and signal handlers: a lookup in a small static table, no locks.
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/host_tag.h"
#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::chan {
namespace {

// Listeners of this process that listen on another port than the program's (restored process memory).
struct Moved {
  int32_t fd;
  uint64_t ino;    // the socket's inode: a program that closed the listener and reused the number is not it
  uint16_t virt;   // the program's port
};
constexpr uint32_t kMaxMoved = 64;
Moved g_moved[kMaxMoved];
uint32_t g_nmoved;

// This host's moved ports (every process of the computation here), read in the refill phase.
struct Route {
  uint16_t virt, real;
};
constexpr uint32_t kMaxRoutes = 256;
Route g_routes[kMaxRoutes];
uint32_t g_nroutes;  // published last (release): the wrapper reads the table only up to it
constexpr uint32_t kMaxLocal4 = 64;
uint32_t g_local4[kMaxLocal4];  // this host's IPv4 addresses (network order), read with the routes
uint32_t g_nlocal4;
constexpr uint32_t kMaxLocal6 = 32;
in6_addr g_local6[kMaxLocal6];  // this host's IPv6 addresses, read with the routes
uint32_t g_nlocal6;
uint64_t g_publish_gen;  // between this restored process's publish and its load: the restart's generation

uint16_t port_of(const sockaddr_storage& a) {
  return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(a).sin6_port
                                       : reinterpret_cast<const sockaddr_in&>(a).sin_port);
}

// "<boot id's first 8 hex digits>-<network namespace inode>": where a port number means one socket. Read
// afresh, unlike plugins/common/host_tag (cached so a restored process names its checkpoint's objects):
// a port is this host's and this namespace's now.
void host_tag(char* out, size_t cap) { plugins::host_now(out, cap, "net"); }

void key_of(char* out, size_t cap, uint64_t gen, uint16_t port) {
  char tag[64];
  host_tag(tag, sizeof tag);
  plugins::Msg(out, cap).s("lport.").u(gen).s(".").s(tag).s(".").u(port);
}

bool local_v4(uint32_t a) {  // network order
  if ((ntohl(a) >> 24) == 127 || a == htonl(INADDR_ANY)) return true;
  const uint32_t n = __atomic_load_n(&g_nlocal4, __ATOMIC_ACQUIRE);
  for (uint32_t k = 0; k < n; ++k)
    if (g_local4[k] == a) return true;
  return false;
}

void read_local_v4() {
  g_nlocal4 = 0;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  struct ifreq reqs[kMaxLocal4];
  struct ifconf ifc;
  ifc.ifc_len = sizeof reqs;
  ifc.ifc_req = reqs;
  if (ioctl(s, SIOCGIFCONF, &ifc) == 0) {
    uint32_t n = 0;
    for (size_t k = 0; k < size_t(ifc.ifc_len) / sizeof reqs[0] && n < kMaxLocal4; ++k)
      if (reqs[k].ifr_addr.sa_family == AF_INET)
        g_local4[n++] = reinterpret_cast<const sockaddr_in&>(reqs[k].ifr_addr).sin_addr.s_addr;
    __atomic_store_n(&g_nlocal4, n, __ATOMIC_RELEASE);
  }
  close(s);
}

bool local_v6(const in6_addr& a) {
  const uint32_t n = __atomic_load_n(&g_nlocal6, __ATOMIC_ACQUIRE);
  for (uint32_t k = 0; k < n; ++k)
    if (memcmp(&g_local6[k], &a, sizeof a) == 0) return true;
  return false;
}

int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// /proc/net/if_inet6: a line per address, "<32 hex digits> <ifindex> <prefix> <scope> <flags> <name>".
// Read with plain system calls into a static buffer (no stdio, no allocation); addresses past what it
// holds (about 80 lines) or past kMaxLocal6 are not seen.
void read_local_v6() {
  g_nlocal6 = 0;
  static char buf[4096];
  const int fd = open("/proc/net/if_inet6", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no IPv6 in this kernel or namespace
  size_t len = 0;
  for (ssize_t r; len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0;) len += size_t(r);
  close(fd);
  buf[len] = '\0';
  uint32_t n = 0;
  for (const char* p = buf; *p && n < kMaxLocal6;) {
    in6_addr a;
    bool ok = true;
    for (int k = 0; k < 16 && ok; ++k) {
      const int hi = hex_digit(p[2 * k]), lo = hi < 0 ? -1 : hex_digit(p[2 * k + 1]);
      ok = lo >= 0;
      if (ok) a.s6_addr[k] = uint8_t(hi << 4 | lo);
    }
    if (ok && p[32] == ' ') g_local6[n++] = a;
    const char* nl = strchr(p, '\n');
    if (!nl) break;
    p = nl + 1;
  }
  __atomic_store_n(&g_nlocal6, n, __ATOMIC_RELEASE);
}

void read_local_addresses() {
  read_local_v4();
  read_local_v6();
}

// Whether `to` (len bytes) is a TCP/IP address of this host; its port in *port.
bool this_host(const sockaddr* to, socklen_t len, uint16_t* port) {
  if (to->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(to);
    *port = ntohs(a->sin_port);
    return local_v4(a->sin_addr.s_addr);
  }
  if (to->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(to);
    *port = ntohs(a->sin6_port);
    const in6_addr& ip = a->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&ip) || IN6_IS_ADDR_UNSPECIFIED(&ip) ||
           (IN6_IS_ADDR_V4MAPPED(&ip) && local_v4(reinterpret_cast<const uint32_t*>(&ip)[3])) || local_v6(ip);
  }
  return false;
}

}  // namespace

uint16_t portmap_virtual(const Chan& c) {
  for (uint32_t k = 0; k < g_nmoved; ++k)
    if (g_moved[k].fd == c.fd && g_moved[k].ino == c.ino) return g_moved[k].virt;
  return 0;
}

void portmap_note(int fd, uint16_t virt, uint16_t real) {
  uint32_t k = 0;
  while (k < g_nmoved && g_moved[k].fd != fd) ++k;
  if (virt == real || virt == 0) {  // the program's own port again: nothing to translate
    if (k < g_nmoved) g_moved[k] = g_moved[--g_nmoved];
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  if (k == g_nmoved) {
    if (g_nmoved == kMaxMoved) return;  // the connects to it are not translated (said by the caller's warning)
    ++g_nmoved;
  }
  g_moved[k] = {fd, uint64_t(st.st_ino), virt};
}

int portmap_publish(uint64_t gen, char* msg, size_t cap) {
  __atomic_store_n(&g_nroutes, 0u, __ATOMIC_RELEASE);  // last generation's routes are no one's now
  g_publish_gen = gen;
  for (uint32_t i = 0; i < g_nchans; ++i) {
    const Chan& c = g_chans[i];
    if (c.kind != kListen || (c.family != AF_INET && c.family != AF_INET6)) continue;
    sockaddr_storage now{};
    socklen_t l = sizeof now;
    if (getsockname(c.fd, reinterpret_cast<sockaddr*>(&now), &l) != 0) continue;
    // The program's port: the noted one when relisten moved it, else the one it listens on.
    const uint16_t real = port_of(now);
    uint16_t virt = real;
    struct stat st;
    for (uint32_t k = 0; k < g_nmoved; ++k)
      if (g_moved[k].fd == c.fd && fstat(c.fd, &st) == 0 && g_moved[k].ino == uint64_t(st.st_ino)) virt = g_moved[k].virt;
    char key[160], val[16];
    key_of(key, sizeof key, gen, virt);
    plugins::Msg(val, sizeof val).u(real);
    if (!inject::coord_publish(key, val)) {
      plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": cannot publish where port ").u(virt).s(" listens now");
      return -EIO;
    }
  }
  return 0;
}

int portmap_load(uint64_t gen) {
  char prefix[160], key[200], val[32];
  key_of(prefix, sizeof prefix, gen, 0);
  prefix[strlen(prefix) - 1] = '\0';  // "lport.<G>.<host>."
  const size_t plen = strlen(prefix);
  char after[200];
  memcpy(after, prefix, plen + 1);
  uint32_t n = 0;
  read_local_addresses();
  for (;;) {
    int r = inject::coord_next(prefix, after, 10000, key, sizeof key, val, sizeof val);
    if (r != 1) break;
    memcpy(after, key, strlen(key) + 1);
    uint32_t virt = 0, real = 0;
    for (const char* p = key + plen; *p >= '0' && *p <= '9'; ++p) virt = virt * 10 + uint32_t(*p - '0');
    for (const char* p = val; *p >= '0' && *p <= '9'; ++p) real = real * 10 + uint32_t(*p - '0');
    if (virt == 0 || real == 0 || virt > 65535 || real > 65535 || virt == real) continue;
    if (n == kMaxRoutes) {
      plugins::warn("channels: more than 256 listeners of this host moved to other ports: connects to the others "
                    "are not sent to their new ports");
      break;
    }
    g_routes[n++] = {uint16_t(virt), uint16_t(real)};
  }
  __atomic_store_n(&g_nroutes, n, __ATOMIC_RELEASE);
  g_publish_gen = 0;  // the restart's reconnect is over
  return 0;
}

bool portmap_retarget(sockaddr_storage* to_io) {
  uint16_t port;
  if (g_publish_gen == 0 || !this_host(reinterpret_cast<const sockaddr*>(to_io), sizeof *to_io, &port)) return false;
  const uint64_t gen = g_publish_gen;
  char key[160], val[16];
  key_of(key, sizeof key, gen, port);
  if (inject::coord_lookup(key, true, 10000, val, sizeof val) != 1) return false;
  uint32_t r = 0;
  for (const char* p = val; *p >= '0' && *p <= '9'; ++p) r = r * 10 + uint32_t(*p - '0');
  if (r == 0 || r > 65535) return false;
  reinterpret_cast<sockaddr_in*>(to_io)->sin_port = htons(uint16_t(r));  // sin6_port: the same offset
  return true;
}

namespace {

// An image exec'ed after a restart starts without the table: its parent handed the routes down in
// REVIVE_PORTMAP=<host>;P:Q,P:Q,... (proctree's exec_env.cpp asks revive_chan_portmap_env below). Read
// at the first connect, by one thread (the others meanwhile see no route), and only on the host it names.
int g_env_read;  // 0 not yet, 1 being read, 2 done

void routes_from_env() {
  int expect = 0;
  if (!__atomic_compare_exchange_n(&g_env_read, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  const char* v = getenv("REVIVE_PORTMAP");
  char tag[64] = "";
  if (v) host_tag(tag, sizeof tag);  // the host is read only where routes were handed down
  const size_t tl = strlen(tag);
  if (v && tl && strncmp(v, tag, tl) == 0 && v[tl] == ';') {
    read_local_addresses();
    uint32_t n = 0;
    for (const char* p = v + tl + 1; *p && n < kMaxRoutes;) {
      uint32_t virt = 0, real = 0;
      for (; *p >= '0' && *p <= '9'; ++p) virt = virt * 10 + uint32_t(*p - '0');
      if (*p++ != ':') break;
      for (; *p >= '0' && *p <= '9'; ++p) real = real * 10 + uint32_t(*p - '0');
      if (virt && real && virt <= 65535 && real <= 65535 && virt != real) g_routes[n++] = {uint16_t(virt), uint16_t(real)};
      if (*p != ',') break;
      ++p;
    }
    __atomic_store_n(&g_nroutes, n, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&g_env_read, 2, __ATOMIC_RELEASE);
}

}  // namespace

// The port a connect to (address, port) of this host must reach (0: the one given).
uint16_t portmap_route(const sockaddr* to, socklen_t len) {
  if (__atomic_load_n(&g_env_read, __ATOMIC_ACQUIRE) == 0) routes_from_env();
  const uint32_t n = __atomic_load_n(&g_nroutes, __ATOMIC_ACQUIRE);
  if (n == 0 || !to) return 0;
  uint16_t port = 0;
  if (to->sa_family != AF_INET && to->sa_family != AF_INET6) return 0;
  const uint16_t want = ntohs(reinterpret_cast<const sockaddr_in*>(to)->sin_port);  // sin6_port: same offset
  uint32_t k = 0;
  while (k < n && g_routes[k].virt != want) ++k;
  if (k == n || !this_host(to, len, &port)) return 0;  // the common case returns before any address check
  return g_routes[k].real;
}

}  // namespace revive::chan

// For proctree's exec wrappers: "REVIVE_PORTMAP=<host>;P:Q,..." of this process's routes (0: none, or no room).
extern "C" __attribute__((visibility("hidden"))) size_t revive_chan_portmap_env(char* out, size_t cap) {
  using namespace revive::chan;
  const uint32_t n = __atomic_load_n(&g_nroutes, __ATOMIC_ACQUIRE);
  if (n == 0) return 0;
  char tag[64];
  host_tag(tag, sizeof tag);
  revive::plugins::Msg m(out, cap);
  m.s("REVIVE_PORTMAP=").s(tag).s(";");
  for (uint32_t k = 0; k < n; ++k) m.s(k ? "," : "").u(g_routes[k].virt).s(":").u(g_routes[k].real);
  return m.size() + 1 < cap ? m.size() : 0;
}

VPID_SLOT(int, connect, (int fd, const struct sockaddr* to, socklen_t len))
// connect(): a TCP connect to a listener of this host that moved to another port goes there (see above).
REVIVE_EXPORT int connect(int fd, const struct sockaddr* to, socklen_t len) {
  connect_fn f = revive::plugins::next_or_enosys(&g_connect, "connect");
  if (!f) return -1;
  const uint16_t real = revive::chan::portmap_route(to, len);
  if (real == 0) return f(fd, to, len);
  int type = 0;
  socklen_t tl = sizeof type;
  const int e = errno;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) {
    errno = e;
    return f(fd, to, len);
  }
  errno = e;
  sockaddr_storage moved;
  memcpy(&moved, to, len < sizeof moved ? len : sizeof moved);
  if (to->sa_family == AF_INET)
    reinterpret_cast<sockaddr_in&>(moved).sin_port = htons(real);
  else
    reinterpret_cast<sockaddr_in6&>(moved).sin6_port = htons(real);
  return f(fd, reinterpret_cast<const sockaddr*>(&moved), len);
}
