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
// On another host (since 2026-11-29): a listener restored where its old address is not this host's
// publishes "laddr.<G>.<old address>.<P>" = "<new address>.<Q>" for each address the program's peers knew
// it at (its own bound address, or, listening on every address, the addresses of the host this process
// was first checkpointed on: g_origin); every restored process reads them in the refill phase, and
// connect() sends a TCP connect to such an old address and port to the new ones (Open MPI's TCP
// transport connects lazily, to the address of its peer's business card); bound UDP sockets publish
// "uaddr." alike, and sendto/recvfrom (signal plugin) and sendmsg/sendmmsg/recvmsg/recvmmsg (vpid plugin)
// translate through revive_chan_dgram_to/from. A bound UDP port another program took on the same host
// moves as a listener's does ("uport.<G>.<host>.<P>" = Q; since 2026-11-29). Not covered:
// listeners opened after a migration (their peers know the new host's address, which is not kept). IPv6 addresses of this host's interfaces are read from
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
  bool udp;  // a bound UDP socket's port (since 2026-11-29: "uport." keys), else a TCP listener's
};
constexpr uint32_t kMaxRoutes = 256;
Route g_routes[kMaxRoutes];
uint32_t g_nroutes;  // published last (release): the wrapper reads the table only up to it
uint32_t g_nuport;   // how many of them are UDP's (sendto/recvfrom look only when there are some)
constexpr uint32_t kMaxLocal4 = 64;
uint32_t g_local4[kMaxLocal4];  // this host's IPv4 addresses (network order), read with the routes
uint32_t g_nlocal4;
constexpr uint32_t kMaxLocal6 = 32;
in6_addr g_local6[kMaxLocal6];  // this host's IPv6 addresses, read with the routes
uint32_t g_nlocal6;
// Listeners on other hosts now (read in the refill phase): a connect to old address and port goes to new.
struct XRoute {
  uint8_t fam;  // AF_INET (the first 4 bytes of the addresses) or AF_INET6
  uint8_t udp;  // a bound UDP socket's ("uaddr."), else a TCP listener's ("laddr.")
  uint16_t old_port, new_port;
  uint8_t old_addr[16], new_addr[16];
};
constexpr uint32_t kMaxXRoutes = 256;
XRoute g_xroutes[kMaxXRoutes];
uint32_t g_nxroutes;  // published last (release), like g_nroutes
uint32_t g_nudp;      // how many of them are UDP's (sendto/recvfrom look only when there are some)
// The addresses of every host this process was checkpointed on while it had an IP listener or bound UDP
// socket (loopback and link-local left out): where the program's peers may know its sockets on every
// address to be — the first host's, and, after a migration, the new host's, which peers learn from then
// on (a listener opened there, an address handed out in an answer). Kept in process memory, so a
// restored process still has them. Until 2026-11-29 only the first host's were noted: a second
// migration did not translate the addresses peers had learned after the first (hosts.migrate_twice).
constexpr uint32_t kMaxOrigin = 32;
struct HostAddr {
  uint8_t fam;
  uint8_t a[16];
};
HostAddr g_origin[kMaxOrigin];
uint32_t g_norigin;
char g_origin_host[64];  // host_tag() of the host whose addresses were noted last
uint64_t g_publish_gen;  // between this restored process's publish and its load: the restart's generation

// "<boot id's first 8 hex digits>-<network namespace inode>": where a port number means one socket. Read
// afresh, unlike plugins/common/host_tag (cached so a restored process names its checkpoint's objects):
// a port is this host's and this namespace's now.
void host_tag(char* out, size_t cap) { plugins::host_now(out, cap, "net"); }

// "lport.<G>.<host>.<P>" (a TCP listener's), or with udp "uport." (a bound UDP socket's).
void key_of(char* out, size_t cap, uint64_t gen, uint16_t port, bool udp = false) {
  char tag[64];
  host_tag(tag, sizeof tag);
  plugins::Msg(out, cap).s(udp ? "uport." : "lport.").u(gen).s(".").s(tag).s(".").u(port);
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

// "<hex address>.<port>" (8 or 32 hex digits: chan's hex()).
void addr_text(plugins::Msg& m, uint8_t fam, const uint8_t* a, uint16_t port) {
  char h[33];
  hex(h, sizeof h, a, fam == AF_INET ? 4 : 16);
  m.s(h).s(".").u(port);
}

// Parses "<hex address>.<port>" at p; the character after it in *end. False: not one.
bool parse_addr(const char* p, uint8_t* fam, uint8_t* a, uint16_t* port, const char** end) {
  int n = 0;
  while (hex_digit(p[n]) >= 0) ++n;
  if ((n != 8 && n != 32) || p[n] != '.') return false;
  *fam = n == 8 ? AF_INET : AF_INET6;
  memset(a, 0, 16);
  for (int k = 0; k < n / 2; ++k) a[k] = uint8_t(hex_digit(p[2 * k]) << 4 | hex_digit(p[2 * k + 1]));
  p += n + 1;
  uint32_t v = 0;
  int d = 0;
  for (; *p >= '0' && *p <= '9' && d < 6; ++p, ++d) v = v * 10 + uint32_t(*p - '0');
  if (d == 0 || v == 0 || v > 65535) return false;
  *port = uint16_t(v);
  *end = p;
  return true;
}

bool here(uint8_t fam, const uint8_t* a) {
  if (fam == AF_INET) {
    uint32_t v;
    memcpy(&v, a, 4);
    return local_v4(v);
  }
  in6_addr v;
  memcpy(&v, a, 16);
  return IN6_IS_ADDR_LOOPBACK(&v) || IN6_IS_ADDR_UNSPECIFIED(&v) || local_v6(v);
}

// This host's address of family fam that peers elsewhere reach: our end of the coordinator connection,
// else the first interface address that is neither loopback nor link-local. False: none.
bool reachable_here(uint8_t fam, uint8_t* out) {
  sockaddr_storage a{};
  socklen_t l = sizeof a;
  const int cs = inject::coord_socket();
  if (cs >= 0 && getsockname(cs, reinterpret_cast<sockaddr*>(&a), &l) == 0) {
    if (fam == AF_INET && a.ss_family == AF_INET) {
      const uint32_t v = reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr;
      if ((ntohl(v) >> 24) != 127) {
        memcpy(out, &v, 4);
        return true;
      }
    }
    if (fam == AF_INET6 && a.ss_family == AF_INET6) {
      const in6_addr& v = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
      if (!IN6_IS_ADDR_LOOPBACK(&v) && !IN6_IS_ADDR_LINKLOCAL(&v) && !IN6_IS_ADDR_V4MAPPED(&v)) {
        memcpy(out, &v, 16);
        return true;
      }
    }
  }
  if (fam == AF_INET) {
    for (uint32_t k = 0; k < g_nlocal4; ++k)
      if ((ntohl(g_local4[k]) >> 24) != 127) {
        memcpy(out, &g_local4[k], 4);
        return true;
      }
    return false;
  }
  for (uint32_t k = 0; k < g_nlocal6; ++k)
    if (!IN6_IS_ADDR_LOOPBACK(&g_local6[k]) && !IN6_IS_ADDR_LINKLOCAL(&g_local6[k])) {
      memcpy(out, &g_local6[k], 16);
      return true;
    }
  return false;
}

// An IP socket address as family, bytes (an IPv4-mapped IPv6 address as IPv4) and port; false: not one.
bool split(const sockaddr* to, socklen_t len, uint8_t* fam, uint8_t* a, uint16_t* port) {
  memset(a, 0, 16);
  if (to->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(to);
    *fam = AF_INET;
    memcpy(a, &s->sin_addr, 4);
    *port = ntohs(s->sin_port);
    return true;
  }
  if (to->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(to);
    *port = ntohs(s->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
      *fam = AF_INET;
      memcpy(a, s->sin6_addr.s6_addr + 12, 4);
    } else {
      *fam = AF_INET6;
      memcpy(a, &s->sin6_addr, 16);
    }
    return true;
  }
  return false;
}

// A socket's own address: family and bytes, as split(); false for a wildcard.
bool specific(const sockaddr_storage& s, uint8_t* fam, uint8_t* a) {
  uint16_t port;
  static const uint8_t kZero[16] = {};
  return split(reinterpret_cast<const sockaddr*>(&s), sizeof s, fam, a, &port) &&
         memcmp(a, kZero, *fam == AF_INET ? 4 : 16) != 0;
}

// Writes address and port of the route's one side into *out, a copy of `to` (len bytes): an IPv4-mapped
// IPv6 address stays mapped.
void put(const sockaddr* to, socklen_t len, const uint8_t* addr, uint16_t port, uint8_t fam, sockaddr_storage* out) {
  memcpy(out, to, len < sizeof *out ? len : sizeof *out);
  if (to->sa_family == AF_INET) {
    auto& s = reinterpret_cast<sockaddr_in&>(*out);
    memcpy(&s.sin_addr, addr, 4);
    s.sin_port = htons(port);
  } else {
    auto& s = reinterpret_cast<sockaddr_in6&>(*out);
    if (fam == AF_INET) memcpy(s.sin6_addr.s6_addr + 12, addr, 4);
    else memcpy(&s.sin6_addr, addr, 16);
    s.sin6_port = htons(port);
  }
}

// Publishes "<prefix><G>.<old>.<virt>" = "<new>.<real>" when old is not this host's (a restart elsewhere).
// new: the listener's own address when it is bound to one, else this host's reachable one.
// A TCP listener publishes an old address that is still this host's too (new = old): a client whose
// connection sat in its backlog at the checkpoint connects again in the reconnect phase and waits for the
// key, not knowing whether the listener moved (portmap_retarget). portmap_load leaves such routes out.
bool publish_moved_address(const char* prefix, uint64_t gen, uint8_t fam, const uint8_t* old, uint16_t virt,
                           const sockaddr_storage& now, uint16_t real) {
  const bool tcp = prefix[0] == 'l';
  uint8_t nfam, na[16];
  if (here(fam, old)) {
    if (!tcp) return true;
    memcpy(na, old, 16);
  } else if (!specific(now, &nfam, na) || nfam != fam) {
    if (!reachable_here(fam, na)) return true;  // no address of that family here: nobody can reach it anyway
  }
  char key[160], val[80];
  plugins::Msg k(key, sizeof key);
  k.s(prefix).u(gen).s(".");
  addr_text(k, fam, old, virt);
  plugins::Msg v(val, sizeof val);
  addr_text(v, fam, na, real);
  return inject::coord_publish(key, val);
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

// The addresses the program's peers know socket c at, where they are not this host's (another host now):
// its own bound address, or, bound to every address, the ones noted at its process's first checkpoint.
bool publish_old_addresses(const char* prefix, uint64_t gen, const Chan& c, uint16_t virt, const sockaddr_storage& now,
                           uint16_t real) {
  uint8_t fam, a[16];
  if (specific(c.local, &fam, a)) return publish_moved_address(prefix, gen, fam, a, virt, now, real);
  for (uint32_t k = 0; k < g_norigin; ++k) {
    const HostAddr& o = g_origin[k];
    if (o.fam == AF_INET6 && c.family == AF_INET) continue;
    if (o.fam == AF_INET && c.family == AF_INET6 && c.v6only) continue;
    if (!publish_moved_address(prefix, gen, o.fam, o.a, virt, now, real)) return false;
  }
  return true;
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
  __atomic_store_n(&g_nuport, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&g_nxroutes, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&g_nudp, 0u, __ATOMIC_RELEASE);
  g_publish_gen = gen;
  read_local_addresses();  // which of the old addresses are this host's
  // TCP listeners, and bound, unconnected UDP sockets others send to (a connected one's peer is rebuilt
  // with it: chan_udp.cpp).
  for (uint32_t i = 0; i < g_nchans; ++i) {
    const Chan& c = g_chans[i];
    const bool udp = c.kind == kDgramBound && !c.dgram_peer;
    if ((c.kind != kListen && !udp) || (c.family != AF_INET && c.family != AF_INET6)) continue;
    sockaddr_storage now{};
    socklen_t l = sizeof now;
    if (getsockname(c.fd, reinterpret_cast<sockaddr*>(&now), &l) != 0) continue;
    // The program's port: the noted one when relisten/rebind_datagram moved it, else the one it has.
    const uint16_t real = port_of(now);
    uint16_t virt = real;
    struct stat st;
    for (uint32_t k = 0; k < g_nmoved; ++k)
      if (g_moved[k].fd == c.fd && fstat(c.fd, &st) == 0 && g_moved[k].ino == uint64_t(st.st_ino)) virt = g_moved[k].virt;
    const char* what = udp ? "UDP port " : "port ";
    // A TCP listener publishes its port even when it has its own (backlog clients look it up); a UDP
    // socket only a moved one.
    if (!udp || virt != real) {
      char key[160], val[16];
      key_of(key, sizeof key, gen, virt, udp);
      plugins::Msg(val, sizeof val).u(real);
      if (!inject::coord_publish(key, val)) {
        plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": cannot publish where ").s(what).u(virt).s(" is now");
        return -EIO;
      }
    }
    if (!publish_old_addresses(udp ? "uaddr." : "laddr.", gen, c, virt, now, real)) {
      plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": cannot publish where ").s(what).u(virt).s(" of its old host is now");
      return -EIO;
    }
  }
  return 0;
}

void portmap_origin() {
  char tag[64];
  host_tag(tag, sizeof tag);
  if (strcmp(tag, g_origin_host) == 0) return;  // this host's are noted (one stat per call)
  memcpy(g_origin_host, tag, sizeof tag);
  read_local_addresses();
  auto note = [](uint8_t fam, const void* a, size_t len) {
    for (uint32_t k = 0; k < g_norigin; ++k)
      if (g_origin[k].fam == fam && memcmp(g_origin[k].a, a, len) == 0) return;
    if (g_norigin == kMaxOrigin) return;  // the first hosts' are kept
    HostAddr& h = g_origin[g_norigin++];
    h.fam = fam;
    memset(h.a, 0, sizeof h.a);
    memcpy(h.a, a, len);
  };
  for (uint32_t k = 0; k < g_nlocal4; ++k)
    if ((ntohl(g_local4[k]) >> 24) != 127 && g_local4[k] != 0) note(AF_INET, &g_local4[k], 4);
  for (uint32_t k = 0; k < g_nlocal6; ++k)
    if (!IN6_IS_ADDR_LOOPBACK(&g_local6[k]) && !IN6_IS_ADDR_LINKLOCAL(&g_local6[k])) note(AF_INET6, &g_local6[k], 16);
}

int portmap_load(uint64_t gen) {
  char prefix[160], key[200], val[32];
  char after[200];
  uint32_t n = 0, nu = 0;
  read_local_addresses();
  for (int kind = 0; kind < 2; ++kind) {
    const bool udp = kind == 1;
    key_of(prefix, sizeof prefix, gen, 0, udp);
    prefix[strlen(prefix) - 1] = '\0';  // "lport.<G>.<host>." (UDP: "uport.")
    const size_t plen = strlen(prefix);
    memcpy(after, prefix, plen + 1);
    for (;;) {
      int r = inject::coord_next(prefix, after, 10000, key, sizeof key, val, sizeof val);
      if (r != 1) break;
      memcpy(after, key, strlen(key) + 1);
      uint32_t virt = 0, real = 0;
      for (const char* p = key + plen; *p >= '0' && *p <= '9'; ++p) virt = virt * 10 + uint32_t(*p - '0');
      for (const char* p = val; *p >= '0' && *p <= '9'; ++p) real = real * 10 + uint32_t(*p - '0');
      if (virt == 0 || real == 0 || virt > 65535 || real > 65535 || virt == real) continue;
      if (n == kMaxRoutes) {
        plugins::warn("channels: more than 256 sockets of this host moved to other ports: connects and datagrams to "
                      "the others are not sent to their new ports");
        break;
      }
      g_routes[n++] = {uint16_t(virt), uint16_t(real), udp};
      nu += udp;
    }
  }
  __atomic_store_n(&g_nuport, nu, __ATOMIC_RELEASE);
  __atomic_store_n(&g_nroutes, n, __ATOMIC_RELEASE);
  // Listeners and bound UDP sockets on another host than their peers knew them at (every host's).
  uint32_t nx = 0, nudp = 0;
  static const char* const kKinds[] = {"laddr.", "uaddr."};
  for (const char* kind : kKinds) {
    plugins::Msg(prefix, sizeof prefix).s(kind).u(gen).s(".");
    const size_t xlen = strlen(prefix);
    memcpy(after, prefix, xlen + 1);
    for (;;) {
      char xval[80];
      int r = inject::coord_next(prefix, after, 10000, key, sizeof key, xval, sizeof xval);
      if (r != 1) break;
      memcpy(after, key, strlen(key) + 1);
      XRoute x{};
      uint8_t nfam;
      const char* end;
      if (!parse_addr(key + xlen, &x.fam, x.old_addr, &x.old_port, &end) || *end ||
          !parse_addr(xval, &nfam, x.new_addr, &x.new_port, &end) || *end || nfam != x.fam)
        continue;
      if (x.old_port == x.new_port && memcmp(x.old_addr, x.new_addr, 16) == 0) continue;  // not moved
      if (nx == kMaxXRoutes) {
        plugins::warn("channels: more than 256 sockets moved to other hosts: sends and connects to the others' old "
                      "addresses are not sent to their new ones");
        break;
      }
      x.udp = kind[0] == 'u';
      nudp += x.udp;
      g_xroutes[nx++] = x;
    }
  }
  __atomic_store_n(&g_nudp, nudp, __ATOMIC_RELEASE);
  __atomic_store_n(&g_nxroutes, nx, __ATOMIC_RELEASE);
  g_publish_gen = 0;  // the restart's reconnect is over
  return 0;
}

bool portmap_retarget(sockaddr_storage* to_io) {
  uint16_t port;
  if (g_publish_gen == 0) return false;
  // A listener's address other than loopback: where it listens now, wherever that is (every restored TCP
  // listener publishes each of its old addresses, moved or not: publish_moved_address). The address may
  // be this host's now and the listener elsewhere (two hosts swapped), so this comes first.
  uint8_t fam, a[16];
  if (specific(*to_io, &fam, a) && !(fam == AF_INET && a[0] == 127) &&
      !(fam == AF_INET6 && IN6_IS_ADDR_LOOPBACK(reinterpret_cast<const in6_addr*>(a)))) {
    uint8_t nfam, na[16];
    uint16_t nport;
    const char* end;
    char key[160], val[80];
    plugins::Msg k(key, sizeof key);
    k.s("laddr.").u(g_publish_gen).s(".");
    addr_text(k, fam, a, ntohs(reinterpret_cast<const sockaddr_in*>(to_io)->sin_port));  // sin6_port: same offset
    if (inject::coord_lookup(key, true, 5000, val, sizeof val) == 1 && parse_addr(val, &nfam, na, &nport, &end) &&
        !*end && nfam == fam) {
      sockaddr_storage old = *to_io;
      put(reinterpret_cast<const sockaddr*>(&old), sizeof old, na, nport, fam, to_io);
      return true;
    }
  }
  if (!this_host(reinterpret_cast<const sockaddr*>(to_io), sizeof *to_io, &port)) return false;
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

// An image exec'ed after a restart starts without the tables: its parent handed the routes down in
// REVIVE_PORTMAP=<host>;P:Q,P:Q,.../<old>.<P>=<new>.<Q>,... (this host's moved ports, then listeners on
// other hosts; proctree's exec_env.cpp asks revive_chan_portmap_env below). Read at the first connect,
// by one thread (the others meanwhile see no route), and only on the host it names.
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
    const char* p = v + tl + 1;
    uint32_t nu = 0;
    while (((*p >= '0' && *p <= '9') || *p == 'u') && n < kMaxRoutes) {
      const bool udp = *p == 'u';  // "uP:Q": a bound UDP socket's
      if (udp) ++p;
      uint32_t virt = 0, real = 0;
      for (; *p >= '0' && *p <= '9'; ++p) virt = virt * 10 + uint32_t(*p - '0');
      if (*p != ':') break;
      ++p;
      for (; *p >= '0' && *p <= '9'; ++p) real = real * 10 + uint32_t(*p - '0');
      if (virt && real && virt <= 65535 && real <= 65535 && virt != real) {
        g_routes[n++] = {uint16_t(virt), uint16_t(real), udp};
        nu += udp;
      }
      if (*p == ',') ++p;
    }
    while (*p && *p != '/') ++p;
    uint32_t nx = 0;
    if (*p == '/') ++p;
    uint32_t nudp = 0;
    while (*p && nx < kMaxXRoutes) {
      XRoute x{};
      uint8_t nfam;
      const char* end;
      x.udp = *p == 'u';  // "u<old>.<P>=<new>.<Q>": a UDP socket's
      if (x.udp) ++p;
      nudp += x.udp;
      if (!parse_addr(p, &x.fam, x.old_addr, &x.old_port, &end) || *end != '=') break;
      if (!parse_addr(end + 1, &nfam, x.new_addr, &x.new_port, &end) || nfam != x.fam) break;
      g_xroutes[nx++] = x;
      p = end;
      if (*p != ',') break;
      ++p;
    }
    __atomic_store_n(&g_nudp, nudp, __ATOMIC_RELEASE);
    __atomic_store_n(&g_nxroutes, nx, __ATOMIC_RELEASE);
    __atomic_store_n(&g_nuport, nu, __ATOMIC_RELEASE);
    __atomic_store_n(&g_nroutes, n, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&g_env_read, 2, __ATOMIC_RELEASE);
}

// A socket now on another host that `to` names: its old address and port (back: its new ones); the route
// or nullptr. udp: a bound UDP socket's, else a TCP listener's.
const XRoute* xroute_of(const sockaddr* to, socklen_t len, bool udp, bool back) {
  const uint32_t n = __atomic_load_n(&g_nxroutes, __ATOMIC_ACQUIRE);
  uint8_t fam, a[16];
  uint16_t port;
  if (n == 0 || !split(to, len, &fam, a, &port)) return nullptr;
  for (uint32_t k = 0; k < n; ++k) {
    const XRoute& x = g_xroutes[k];
    const uint8_t* addr = back ? x.new_addr : x.old_addr;
    if ((back ? x.new_port : x.old_port) == port && x.udp == udp && x.fam == fam &&
        memcmp(addr, a, fam == AF_INET ? 4 : 16) == 0)
      return &x;
  }
  return nullptr;
}

}  // namespace

bool portmap_rewrite(const sockaddr* to, socklen_t len, bool udp, sockaddr_storage* out) {
  if (__atomic_load_n(&g_env_read, __ATOMIC_ACQUIRE) == 0) routes_from_env();
  if (!to || (to->sa_family != AF_INET && to->sa_family != AF_INET6)) return false;
  const uint32_t n = __atomic_load_n(&g_nroutes, __ATOMIC_ACQUIRE);
  const uint32_t nx = __atomic_load_n(&g_nxroutes, __ATOMIC_ACQUIRE);
  if (n == 0 && nx == 0) return false;
  if (const XRoute* x = nx ? xroute_of(to, len, udp, false) : nullptr) {
    put(to, len, x->new_addr, x->new_port, x->fam, out);
    return true;
  }
  if (n == 0) return false;
  const uint16_t want = ntohs(reinterpret_cast<const sockaddr_in*>(to)->sin_port);  // sin6_port: same offset
  uint32_t k = 0;
  while (k < n && (g_routes[k].virt != want || g_routes[k].udp != udp)) ++k;
  uint16_t port = 0;
  if (k == n || !this_host(to, len, &port)) return false;  // the common case returns before any address check
  memcpy(out, to, len < sizeof *out ? len : sizeof *out);
  reinterpret_cast<sockaddr_in*>(out)->sin_port = htons(g_routes[k].real);  // sin6_port: the same offset
  return true;
}

bool portmap_any() {
  if (__atomic_load_n(&g_env_read, __ATOMIC_ACQUIRE) == 0) routes_from_env();
  return __atomic_load_n(&g_nroutes, __ATOMIC_ACQUIRE) || __atomic_load_n(&g_nxroutes, __ATOMIC_ACQUIRE);
}

}  // namespace revive::chan

// For proctree's exec wrappers: "REVIVE_PORTMAP=<host>;P:Q,.../<old>.<P>=<new>.<Q>,..." of this process's
// routes (0: none, or no room).
extern "C" __attribute__((visibility("hidden"))) size_t revive_chan_portmap_env(char* out, size_t cap) {
  using namespace revive::chan;
  if (__atomic_load_n(&g_env_read, __ATOMIC_ACQUIRE) == 0) routes_from_env();  // handed down again
  const uint32_t n = __atomic_load_n(&g_nroutes, __ATOMIC_ACQUIRE);
  const uint32_t nx = __atomic_load_n(&g_nxroutes, __ATOMIC_ACQUIRE);
  if (n == 0 && nx == 0) return 0;
  char tag[64];
  host_tag(tag, sizeof tag);
  revive::plugins::Msg m(out, cap);
  m.s("REVIVE_PORTMAP=").s(tag).s(";");
  for (uint32_t k = 0; k < n; ++k) m.s(k ? "," : "").s(g_routes[k].udp ? "u" : "").u(g_routes[k].virt).s(":").u(g_routes[k].real);
  m.s("/");
  for (uint32_t k = 0; k < nx; ++k) {
    const XRoute& x = g_xroutes[k];
    if (k) m.s(",");
    if (x.udp) m.s("u");
    addr_text(m, x.fam, x.old_addr, x.old_port);
    m.s("=");
    addr_text(m, x.fam, x.new_addr, x.new_port);
  }
  return m.size() + 1 < cap ? m.size() : 0;
}

// For the signal plugin's sendto/recvfrom and the vpid plugin's sendmsg/recvmsg: a datagram sent to a
// bound UDP socket's old address on a host it left goes to its new one (true: *out holds it), and one
// received from a new address is reported from the old one (the program compares it with where it sent:
// a resolver drops a reply from another address). Nothing to do costs two loads.
extern "C" __attribute__((visibility("hidden"))) bool revive_chan_dgram_to(const struct sockaddr* to, socklen_t len,
                                                                          struct sockaddr_storage* out) {
  using namespace revive::chan;
  if (__atomic_load_n(&g_env_read, __ATOMIC_ACQUIRE) == 0) routes_from_env();
  if (!to) return false;
  if (__atomic_load_n(&g_nudp, __ATOMIC_ACQUIRE) != 0) {
    if (const XRoute* x = xroute_of(to, len, true, false)) {
      put(to, len, x->new_addr, x->new_port, x->fam, out);
      return true;
    }
  }
  // A UDP port of this host that moved (another program took it): the same address, the new port.
  return __atomic_load_n(&g_nuport, __ATOMIC_ACQUIRE) != 0 && portmap_rewrite(to, len, true, out);
}

extern "C" __attribute__((visibility("hidden"))) void revive_chan_dgram_from(struct sockaddr* from, socklen_t have,
                                                                            int flags) {
  using namespace revive::chan;
  if (!from) return;
  // Queued again at restore from a stand-in sender: the source it had (chan_udp.cpp).
  if (standin_source(from, have, (flags & MSG_PEEK) != 0)) return;
  if (__atomic_load_n(&g_nudp, __ATOMIC_ACQUIRE) != 0) {
    if (const XRoute* x = xroute_of(from, have, true, true)) {
      sockaddr_storage old;
      put(from, have, x->old_addr, x->old_port, x->fam, &old);
      memcpy(from, &old, have < sizeof old ? have : sizeof old);
      return;
    }
  }
  // From a moved UDP port of this host: reported from the program's port.
  const uint32_t n = __atomic_load_n(&g_nuport, __ATOMIC_ACQUIRE) ? __atomic_load_n(&g_nroutes, __ATOMIC_ACQUIRE) : 0;
  uint16_t port = 0;
  if (n == 0 || !this_host(from, have, &port)) return;
  for (uint32_t k = 0; k < n; ++k)
    if (g_routes[k].udp && g_routes[k].real == port) {
      reinterpret_cast<sockaddr_in*>(from)->sin_port = htons(g_routes[k].virt);  // sin6_port: the same offset
      return;
    }
}

VPID_SLOT(int, connect, (int fd, const struct sockaddr* to, socklen_t len))
// connect(): a TCP connect to a listener of this host that moved to another port, or to a listener's old
// address on a host it left, goes where it listens now; a UDP socket connected to a bound UDP socket's
// old address on a host it left is connected to its new one (see above).
REVIVE_EXPORT int connect(int fd, const struct sockaddr* to, socklen_t len) {
  connect_fn f = revive::plugins::next_or_enosys(&g_connect, "connect");
  if (!f) return -1;
  if (!to || !revive::chan::portmap_any()) return f(fd, to, len);
  int type = 0;
  socklen_t tl = sizeof type;
  const int e = errno;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || (type != SOCK_STREAM && type != SOCK_DGRAM)) {
    errno = e;
    return f(fd, to, len);
  }
  errno = e;
  sockaddr_storage moved;
  if (!revive::chan::portmap_rewrite(to, len, type == SOCK_DGRAM, &moved)) return f(fd, to, len);
  return f(fd, reinterpret_cast<const sockaddr*>(&moved), len);
}
