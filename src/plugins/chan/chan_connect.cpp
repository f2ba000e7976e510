// Restored process: sockets come back. Listening sockets bind their old address again at restore (with
// SO_REUSEADDR, so a port whose old connections sit in TIME_WAIT is free at once). Connections to
// outside peers come back closed. Internal connections are rebuilt in the reconnect phase: the end with
// the smaller name listens on a fresh port and publishes "chanr.<G>.<its name>" = its address; the other
// end looks that up and connects. Each new socket is dup3'd onto the old number with the old flags.
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"
#include "plugins/fd/fd_internal.h"  // epoll_items

namespace revive::chan {
namespace {

constexpr int kReconnectTimeoutMs = 60000;
// A wait for the peer is cut into slices, between which we ask whether the peer's process has left the
// computation: a rank killed during a checkpoint never reconnects, and its peers (then every process
// waiting for them) stalled for the whole timeout.
constexpr int kSliceMs = 200;

int err(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

// The epoll registrations of the descriptor about to be replaced: the kernel drops them with its file.
// (Only the original process has any: on restart the fd plugin's registrations failed on the stand-ins,
// and epoll_rewatch makes them.) Static: one checkpoint thread.
struct Watch {
  int ep;
  uint32_t events;
  uint64_t data;
};
Watch g_watch[64];
int g_nwatch, g_watch_fd;

void collect_watches(int fd) {
  g_nwatch = 0;
  g_watch_fd = fd;
  each_fd(
      [](int ep, void*) {
        char link[64], target[32];
        plugins::Msg(link, sizeof link).s("/proc/self/fd/").i(ep);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n != 22 || memcmp(target, "anon_inode:[eventpoll]", 22) != 0) return;
        const plugins::EpollItem* items;
        int k = plugins::epoll_items(ep, &items);
        for (int j = 0; j < k && g_nwatch < 64; ++j)
          if (items[j].tfd == g_watch_fd) g_watch[g_nwatch++] = Watch{ep, items[j].events, items[j].data};
      },
      nullptr);
}

// Puts `s` at c.fd (replacing the fd plugin's stand-in, or in the original process a connection it
// rebuilds) with the saved flags and epoll registrations.
int place(Chan& c, int s, char* msg, size_t cap) {
  collect_watches(c.fd);
  if (c.nodelay) {
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (s != c.fd && dup3(s, c.fd, c.cloexec ? O_CLOEXEC : 0) < 0) {
    int e = errno;
    close(s);
    return err(msg, cap, c, "cannot put the socket back at its number", e);
  }
  if (s != c.fd) close(s);
  if (!c.cloexec) fcntl(c.fd, F_SETFD, 0);
  fcntl(c.fd, F_SETFL, c.flags & (O_NONBLOCK | O_APPEND | O_ASYNC));
  for (int k = 0; k < g_nwatch; ++k) {
    epoll_event ev = {};
    ev.events = g_watch[k].events;
    ev.data.u64 = g_watch[k].data;
    if (epoll_ctl(g_watch[k].ep, EPOLL_CTL_ADD, c.fd, &ev) != 0 && errno == EEXIST)
      epoll_ctl(g_watch[k].ep, EPOLL_CTL_MOD, c.fd, &ev);
  }
  plugins::epoll_rewatch(c.fd);
  return 0;
}

// A fresh listener for the peer to reconnect to: inet on the wildcard address and a free port, Unix on an
// autobound abstract name (nothing in the filesystem to clean up). *len: the length of its address.
int fresh_listener(const Chan& c, sockaddr_storage* a, socklen_t* len) {
  int s = socket(c.family, c.type | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_storage any;
  memset(&any, 0, sizeof any);
  any.ss_family = sa_family_t(c.family);
  socklen_t l = c.family == AF_UNIX ? sizeof(sa_family_t) : socklen_t(addr_len(c.family));
  *len = sizeof *a;
  if (bind(s, reinterpret_cast<sockaddr*>(&any), l) != 0 || listen(s, 4) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(a), len) != 0) {
    int e = errno;
    close(s);
    errno = e;
    return -1;
  }
  if (c.family != AF_UNIX) {
    in_port_t port = reinterpret_cast<sockaddr_in*>(a)->sin_port;  // same offset in sockaddr_in6
    my_address(c, a);
    reinterpret_cast<sockaddr_in*>(a)->sin_port = port;
  }
  return s;
}

}  // namespace

int publish_addr(const Chan& c, uint64_t gen, const char* prefix, const sockaddr_storage& a, socklen_t len,
                 char* msg, size_t cap) {
  char key[128], val[300];
  plugins::Msg(key, sizeof key).s(prefix).u(gen).s(".").s(c.key);
  hex(val, sizeof val, &a, len);
  return inject::coord_publish(key, val) ? 0 : err(msg, cap, c, "cannot publish the new address", EIO);
}

// The peer's process has left the computation: the coordinator published "gone.<upid>" (Server::NoteGone).
static bool peer_gone(const Chan& c) {
  if (c.peer_upid == 0) return false;
  char key[48], val[8];
  plugins::Msg(key, sizeof key).s("gone.").u(c.peer_upid);
  return inject::coord_lookup(key, false, 10000, val, sizeof val) == 1;
}

static int gone_err(char* msg, size_t cap, const Chan& c) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": the peer (process upid ").u(c.peer_upid)
      .s(") has left the computation");
  return -ESRCH;
}

int lookup_addr(const Chan& c, uint64_t gen, const char* prefix, sockaddr_storage* a, size_t* n, char* msg,
                size_t cap) {
  char key[128], val[300];
  plugins::Msg(key, sizeof key).s(prefix).u(gen).s(".").s(c.peer_key);
  const uint64_t deadline = now_ms() + kReconnectTimeoutMs;
  int r;
  while ((r = inject::coord_lookup(key, true, c.peer_upid ? kSliceMs : kReconnectTimeoutMs, val, sizeof val)) == 0) {
    if (peer_gone(c)) return gone_err(msg, cap, c);
    if (now_ms() > deadline) break;
  }
  if (r != 1) return err(msg, cap, c, "the peer did not publish its new address", r < 0 ? EIO : ETIMEDOUT);
  memset(a, 0, sizeof *a);
  unhex(val, reinterpret_cast<uint8_t*>(a), sizeof *a, n);
  if (*n <= sizeof(sa_family_t) || a->ss_family != c.family)
    return err(msg, cap, c, "the peer published a malformed address", EINVAL);
  return 0;
}

namespace {

// prefix: "chanr." on restart, "chanh." for a half-closed connection rebuilt by the original process.
int listen_fresh(Chan& c, uint64_t gen, const char* prefix, char* msg, size_t cap) {
  sockaddr_storage me;
  socklen_t len = 0;
  int s = fresh_listener(c, &me, &len);
  if (s < 0) return err(msg, cap, c, "cannot listen for the peer's reconnection", errno);
  if (int rc = publish_addr(c, gen, prefix, me, len, msg, cap)) {
    close(s);
    return rc;
  }
  c.listen_fd = s;
  return 0;
}

int connect_peer(Chan& c, uint64_t gen, const char* prefix, char* msg, size_t cap) {
  sockaddr_storage a;
  size_t n = 0;
  if (int rc = lookup_addr(c, gen, prefix, &a, &n, msg, cap)) return rc;
  int s = socket(c.family, c.type | SOCK_CLOEXEC, 0);
  if (s < 0) return err(msg, cap, c, "socket", errno);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), socklen_t(n)) != 0) {
    int e = errno;
    close(s);
    return err(msg, cap, c, "cannot reconnect to the peer", e);
  }
  return place(c, s, msg, cap);
}

int accept_peer(Chan& c, char* msg, size_t cap) {
  const uint64_t deadline = now_ms() + kReconnectTimeoutMs;
  int r;
  while ((r = wait_fd(c.listen_fd, POLLIN, c.peer_upid ? kSliceMs : kReconnectTimeoutMs)) == 0) {
    if (peer_gone(c)) {
      close(c.listen_fd);
      c.listen_fd = -1;
      return gone_err(msg, cap, c);
    }
    if (now_ms() > deadline) break;
  }
  int s = r > 0 ? accept4(c.listen_fd, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  int e = r == 0 ? ETIMEDOUT : errno;
  close(c.listen_fd);
  c.listen_fd = -1;
  if (s < 0) return err(msg, cap, c, "the peer did not reconnect", e);
  return place(c, s, msg, cap);
}

}  // namespace

// The address peers can reach us at: our end of the coordinator connection (same family), else the
// address this end had before.
void my_address(const Chan& c, sockaddr_storage* a) {
  memset(a, 0, sizeof *a);
  socklen_t l = sizeof *a;
  int cs = inject::coord_socket();
  if (cs < 0 || getsockname(cs, reinterpret_cast<sockaddr*>(a), &l) != 0 || a->ss_family != c.family)
    memcpy(a, &c.local, sizeof *a);
}

// SO_REUSEADDR for a port whose connections sit in TIME_WAIT; IPv6-only as before (Open MPI listens on
// 0.0.0.0:P and [::]:P: the second binds only if it is IPv6-only again); a Unix socket file left behind by
// the killed process is removed first (only if it is a socket).
constexpr int kRebindWaitMs = 2000;

bool bind_again(const Chan& c, int s, const sockaddr_storage* at, int wait_ms) {
  if (wait_ms < 0) wait_ms = kRebindWaitMs;
  if (c.family != AF_UNIX) {
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (c.family == AF_INET6) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &c.v6only, sizeof c.v6only);
  }
  const sockaddr_un& un = reinterpret_cast<const sockaddr_un&>(c.local);
  struct stat st;
  if (c.family == AF_UNIX && un.sun_path[0] && stat(un.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
    unlink(un.sun_path);
  // EADDRINUSE is waited out for a while. Seen once in CI (hooks.mpi_cr_mpich, MPICH's autobound abstract
  // datagram name, the restart 10 ms after the kill at load ~9) and not reproduced: the names of killed
  // ranks were free as soon as their pids were in 5 tries by hand. One reading: the killed incarnation's
  // socket outlived its processes while its file was in flight in an SCM_RIGHTS message (the kernel's unix
  // garbage collector releases such files from a work queue). A name that stays taken (another program
  // took the port meanwhile) still fails, naming it, after the wait.
  const sockaddr* to = reinterpret_cast<const sockaddr*>(at ? at : &c.local);
  for (int waited_ms = 0;; waited_ms += 10) {
    if (bind(s, to, c.local_len) == 0) return true;
    if (errno != EADDRINUSE || waited_ms >= wait_ms) return false;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

namespace {

// The program's port `virt` of listener c is served on `real` (chan_portmap.cpp); `again`: as at the last restart.
void say_moved(const Chan& c, uint16_t virt, uint16_t real, bool again) {
  char line[300];
  plugins::Msg(line, sizeof line).s("fd ").i(c.fd).s(": port ").u(virt).s(again ? " is still" : " is")
      .s(" taken by another program; listening on port ").u(real).s(again ? " again" : " instead")
      .s(" (the computation's connects to port ").u(virt).s(" on this host are sent there)");
  plugins::warn(line);
}

// A listening socket binds its old name again (bind_again).
int relisten(Chan& c, char* msg, size_t cap) {
  const bool inet = c.family == AF_INET || c.family == AF_INET6;
  auto set_port = [](sockaddr_storage* a, uint16_t p) { reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(p); };
  // The program's port: the one it listened on, or the one an earlier restart moved it from.
  const uint16_t moved_from = inet ? portmap_virtual(c) : 0;
  const uint16_t virt = moved_from ? moved_from : inet ? port_of(c.local) : 0;
  int s = socket(c.family, c.type | SOCK_CLOEXEC, 0);
  if (s < 0) return err(msg, cap, c, "socket", errno);
  const sockaddr_un& un = reinterpret_cast<const sockaddr_un&>(c.local);
  bool bound = false;
  if (inet && virt != port_of(c.local)) {
    // Moved by an earlier restart: its own port first (free again, the translation ends), no waiting.
    sockaddr_storage own = c.local;
    set_port(&own, virt);
    bound = bind_again(c, s, &own, 0);
    if (!bound) {
      close(s);
      s = socket(c.family, c.type | SOCK_CLOEXEC, 0);
      if (s < 0) return err(msg, cap, c, "socket", errno);
    }
  }
  // A TCP listener that can move (chan_portmap.cpp) waits only briefly for a killed incarnation's socket to
  // go: moving costs nothing the program sees, and the full 2 s were the whole cost of a taken port
  // (bench/channels/port_taken_bench.py: restart to work 3.70 s held vs 1.64 s free before, medians of 5).
  const char* keep_env = inject::restart_env("REVIVE_KEEP_PORTS");
  const bool can_move = inet && inject::coord_configured() && !(keep_env && keep_env[0] == '1');
  if (!bound) bound = bind_again(c, s, nullptr, can_move ? 250 : -1);
  if (!bound && errno == EADDRNOTAVAIL && (c.family == AF_INET || c.family == AF_INET6)) {
    // The address it was bound to is not on this host any more: an interface that went away (a bridge
    // of another job, a VPN) or a restart on another host. UCX and libfabric's tcp provider listen on
    // every interface's own address. The same port on every address keeps the listener (connections made
    // before the checkpoint are rebuilt separately); refusing the restart would lose the job.
    sockaddr_storage any = c.local;
    if (c.family == AF_INET) reinterpret_cast<sockaddr_in&>(any).sin_addr.s_addr = htonl(INADDR_ANY);
    else reinterpret_cast<sockaddr_in6&>(any).sin6_addr = in6addr_any;
    close(s);
    s = socket(c.family, c.type | SOCK_CLOEXEC, 0);
    if (s < 0) return err(msg, cap, c, "socket", errno);
    bound = bind_again(c, s, &any);
    if (bound) {
      char line[160];
      plugins::Msg(line, sizeof line).s("fd ").i(c.fd).s(": the address it listened on is gone; listening on port ")
          .u(ntohs(reinterpret_cast<const sockaddr_in&>(c.local).sin_port)).s(" of every address instead");
      plugins::warn(line);
    }
  }
  // Taken: another program's listener, a socket without SO_REUSEADDR (an outgoing connection given this
  // ephemeral port), or the killed run's own connections closed before the checkpoint, in TIME_WAIT
  // without the option (revive sets it when it checkpoints a socket). Listen's own EADDRINUSE counts too.
  bool listening = bound && listen(s, SOMAXCONN) == 0;
  const int why = listening ? 0 : errno;
  // REVIVE_KEEP_PORTS=1 in the restart's environment: the program's own ports or a failed restart.
  if (!listening && why == EADDRINUSE && can_move) {
    // Another program holds the port (chan_portmap.cpp): a new port of the same address; the
    // computation's connects to the program's port on this host are sent there. No SO_REUSEADDR before
    // the bind: the kernel then picks a port nobody has bound (a few tries: listen can still race). The
    // first version bound port 0 with the option and its listen failed once in CI (rma.transparent, an
    // Open MPI rank's port 49159, reported as the old port's EADDRINUSE): now a failure says both.
    int e = EADDRINUSE;
    for (int attempt = 0; attempt < 8; ++attempt) {
      close(s);
      s = socket(c.family, c.type | SOCK_CLOEXEC, 0);
      if (s < 0) return err(msg, cap, c, "socket", errno);
      if (c.family == AF_INET6) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &c.v6only, sizeof c.v6only);
      sockaddr_storage fresh = c.local;
      set_port(&fresh, 0);
      if (bind(s, reinterpret_cast<const sockaddr*>(&fresh), c.local_len) != 0 || listen(s, SOMAXCONN) != 0) {
        e = errno;
        continue;
      }
      // Now (not before the bind): the connections it accepts inherit the option, so once closed their
      // TIME_WAIT entries do not keep the next restart from binding this port again.
      int one = 1;
      setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_storage now{};
      socklen_t l = sizeof now;
      getsockname(s, reinterpret_cast<sockaddr*>(&now), &l);
      say_moved(c, virt, port_of(now), false);
      if (int rc = place(c, s, msg, cap)) return rc;
      portmap_note(c.fd, virt, port_of(now));
      return 0;
    }
    close(s);
    char what[160];
    plugins::Msg(what, sizeof what).s("port ").u(virt).s(" is taken, and no new port could be listened on");
    return err(msg, cap, c, what, e);
  }
  if (!listening) {
    int e = why;
    close(s);
    char what[160];
    plugins::Msg m(what, sizeof what);
    m.s(c.kind == kListen ? "cannot listen again on " : "cannot bind again to ");
    if (c.family == AF_UNIX) m.s(un.sun_path[0] ? un.sun_path : "an abstract name");
    else m.s("port ").u(ntohs(reinterpret_cast<const sockaddr_in&>(c.local).sin_port));
    return err(msg, cap, c, what, e);
  }
  if (int rc = place(c, s, msg, cap)) return rc;
  if (inet) {
    sockaddr_storage now{};
    socklen_t l = sizeof now;
    if (getsockname(c.fd, reinterpret_cast<sockaddr*>(&now), &l) == 0) {
      portmap_note(c.fd, virt, port_of(now));
      if (port_of(now) != virt) say_moved(c, virt, port_of(now), true);
    }
  }
  return 0;
}

int place_remains(Chan& c, char* msg, size_t cap);

// The peer left the computation (killed during a checkpoint that then failed): nothing can be rebuilt
// with it. What it had sent that we had not read is all it will ever send, so the program gets those
// bytes and then end of file (or the reset the drain read), as it would have without the checkpoint: on
// the old socket when there is nothing to give back, else on a socketpair end holding them whose other
// end is closed.
int keep_widowed(Chan& c, char* msg, size_t cap) {
  c.broken = true;  // the refill leaves it alone
  c.rebuild = false;
  char line[200];
  plugins::Msg(line, sizeof line).s("channels: fd ").i(c.fd).s(": its peer (process upid ").u(c.peer_upid)
      .s(") has left the computation; the program reads its last ").u(c.rx.len)
      .s(c.reset ? " bytes, then a reset" : " bytes, then end of file");
  plugins::warn(line);
  if (c.rx.len == 0 && !c.reset) return 0;
  return place_remains(c, msg, cap);
}

// A socketpair end of c's type holding c.rx (then a reset when c.reset) whose other end is closed, at
// c.fd: the program reads those bytes, then end of file (or ECONNRESET).
int place_remains(Chan& c, char* msg, size_t cap) {
  char line[200];
  int sv[2];
  if (socketpair(AF_UNIX, c.type | SOCK_CLOEXEC, 0, sv) != 0) return err(msg, cap, c, "socketpair", errno);
  // A reset is given back the way the kernel makes one: the other end closes with a byte of ours unread,
  // so the program reads the peer's last bytes and then ECONNRESET, as without the checkpoint.
  if (c.reset) (void)!send(sv[0], "", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  int want = c.rx.len > (1u << 29) ? 1 << 30 : int(2 * c.rx.len + (1 << 16));
  if (setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) != 0)
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
  bool all = true;
  if (is_msg(c)) {
    Chan w = c;
    w.fd = sv[1];
    for (size_t off = 0; off + 4 <= c.rx.len && all;) all = send_record(w, c.rx, &off);
  } else {
    for (size_t off = 0; off < c.rx.len && all;) {
      ssize_t n = send(sv[1], c.rx.p + off, c.rx.len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      all = n > 0;
      if (all) off += size_t(n);
    }
  }
  close(sv[1]);
  if (!all) {
    plugins::Msg(line, sizeof line).s("channels: fd ").i(c.fd).s(": not every byte its peer had sent fits ")
        .s("the replacement socket: some are lost");
    plugins::warn(line);
  }
  c.rx.clear();
  return place(c, sv[0], msg, cap);
}

// New connections for the internal ones (all, or only the half-closed): every listener is published
// before any lookup waits and accepted after every connect, so no cycle of waits across processes.
int rebuild(uint64_t gen, const char* prefix, bool half_closed_only, char* msg, size_t cap) {
  // A SOCK_DGRAM pair has no accept: the "acceptor" binds and publishes first, the other end binds,
  // publishes and connects, then the acceptor connects back (chan_msg.cpp).
  auto mine = [&](const Chan& c) { return c.kind == kConn && !c.broken && (!half_closed_only || c.rebuild); };
  // At resume (half_closed_only) a peer that left the computation ends only its own connection: the
  // program gets what it had sent, then end of file. A restart cannot go on without it.
  auto gone = [&](Chan& c, int rc) { return half_closed_only && rc == -ESRCH ? keep_widowed(c, msg, cap) : rc; };
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!mine(c) || !c.acceptor) continue;
    if (int rc = c.type == SOCK_DGRAM ? dgram_bind(c, gen, prefix, msg, cap) : listen_fresh(c, gen, prefix, msg, cap))
      return rc;
  }
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!mine(c) || c.acceptor) continue;
    if (c.type == SOCK_DGRAM) {
      if (int rc = dgram_bind(c, gen, prefix, msg, cap)) return rc;
      if (int rc = dgram_connect(c, gen, prefix, msg, cap)) return rc;
    } else if (int rc = connect_peer(c, gen, prefix, msg, cap)) {
      if (int rc2 = gone(c, rc)) return rc2;
    }
  }
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!mine(c) || !c.acceptor) continue;
    if (int rc = c.type == SOCK_DGRAM ? dgram_connect(c, gen, prefix, msg, cap) : accept_peer(c, msg, cap))
      if (int rc2 = gone(c, rc)) return rc2;
  }
  return 0;
}

}  // namespace

// The fd plugin's /dev/null stand-in (character device 1:3) is still at fd.
bool is_stand_in(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

namespace {

// A socketpair end of c's type whose other end is closed: reads see end of file, writes fail with EPIPE.
// An outside connection's bytes not yet read at the checkpoint (kept at save: keep_outside_bytes) come first.
int place_widowed(Chan& c, char* msg, size_t cap) {
  if (c.kind == kOutside && c.rx.len > 0) return place_remains(c, msg, cap);
  int sv[2];
  if (socketpair(AF_UNIX, c.type | SOCK_CLOEXEC, 0, sv) != 0) return err(msg, cap, c, "socketpair", errno);
  close(sv[1]);
  return place(c, sv[0], msg, cap);
}

// The same for a pipe end (reader or writer as c was).
int place_widowed_pipe(Chan& c, char* msg, size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return err(msg, cap, c, "pipe", errno);
  bool reader = is_reader(c);
  close(reader ? p[1] : p[0]);
  return place(c, reader ? p[0] : p[1], msg, cap);
}

const char* kind_name(const Chan& c) {
  if (c.kind == kPipe) return "pipe";
  if (c.kind == kAlias) return "socket held by several processes";
  return c.family == AF_UNIX ? "Unix socket connection" : "TCP connection";
}

}  // namespace

// Internal channels rebuilt only through the coordinator: restored alone, they come back widowed.
bool widowed_alone(const Chan& c) {
  return c.fd > 2 && (c.kind == kConn || c.kind == kBacklog || (c.kind == kAlias && c.alias == 2) || c.kind == kPipe);
}

int restore_local(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    c.listen_fd = -1;
    c.share_fd = -1;  // the number the image holds was the original's (a listener made at save)
    if (c.kind == kListen) {
      if (int rc = relisten(c, msg, cap)) return rc;
    } else if (c.kind == kDgramBound) {
      if (int rc = rebind_datagram(c, msg, cap)) return rc;
    } else if (c.kind == kPipeOut && c.fd > 2 && is_stand_in(c.fd)) {
      // Documented policy, as for sockets: a pipe to a process outside the computation comes back with
      // its other end closed (reads see end of file, writes fail with EPIPE), never /dev/null, whose
      // writes would vanish without a sign. fds 0/1/2 are the restart's own; a pipe with both ends here
      // was recreated by the fd plugin (not a stand-in).
      if (int rc = place_widowed_pipe(c, msg, cap)) return rc;
    } else if (c.kind == kOutside) {
      // Documented policy: a connection to a process outside the computation comes back closed by its
      // peer (reads see end of file, writes fail with EPIPE), as if that peer had gone away.
      if (int rc = place_widowed(c, msg, cap)) return rc;
    } else if (widowed_alone(c) && !inject::coord_configured()) {
      // One image restarted alone: its peers in the computation are not coming back. Like an outside
      // peer gone away, never a /dev/null stand-in that would swallow writes as if they were read.
      char line[300];
      plugins::Msg(line, sizeof line).s("fd ").i(c.fd).s(" (").s(kind_name(c)).s(" to another process of the computation) ")
          .s("cannot be rebuilt without a coordinator (restart the computation with revive restart): its peer ")
          .s("comes back closed (reads end of file, writes EPIPE); bytes in flight at the checkpoint are lost");
      plugins::warn(line);
      if (int rc = c.kind == kPipe ? place_widowed_pipe(c, msg, cap) : place_widowed(c, msg, cap)) return rc;
    }
  }
  if (int rc = place_local_aliases(msg, cap)) return rc;  // dups of listeners and outside connections
  if (int rc = reopen_fifos(false, msg, cap)) return rc;
  // Without a coordinator no reconnect phase rebuilds pty pairs: made again here, or widowed.
  if (!inject::coord_configured())
    if (int rc = restore_ptys_alone(msg, cap)) return rc;
  // Restored alone, FIFO writers have no reconnect phase: reopened now (a reader outside the computation
  // may be there; else widowed after the wait, never a /dev/null stand-in).
  return inject::coord_configured() ? 0 : reopen_fifos(true, msg, cap);
}

int place_socket(Chan& c, int s, char* msg, size_t cap) { return place(c, s, msg, cap); }

}  // namespace revive::chan

// Asked by the fd plugin at restore, before it puts a stand-in at fd: will this plugin put the real
// channel there (so the stand-in is a placeholder, not worth a warning)? The table is the checkpoint's,
// restored with memory. Internal channels are rebuilt only with a coordinator.
extern "C" __attribute__((visibility("hidden"))) bool revive_chan_restores(int fd) {
  using namespace revive::chan;
  for (uint32_t i = 0; i < g_nchans; ++i) {
    const Chan& c = g_chans[i];
    if (c.fd != fd || c.kind == kGone) continue;
    if (c.kind == kPtyOut) return false;  // the user's terminal: the fd plugin's
    // A pty pair: rebuilt with a coordinator, else made again here or widowed (chan_pty_alone.cpp).
    if (c.kind == kPtyMaster || c.kind == kPtySlave) return true;
    if (c.kind == kAlias && c.alias == 1) return revive_chan_restores(g_chans[c.alias_of].fd);
    // Internal channels too: rebuilt with a coordinator, else widowed (restore_local), never /dev/null.
    if (c.kind == kOutside || c.kind == kListen || c.kind == kPipeOut || c.kind == kDgramBound || c.kind == kFifo ||
        widowed_alone(c))
      return true;
    return revive::inject::coord_configured();
  }
  return false;
}

// Asked by the fd plugin at save (it runs before ours): 1 if we rebuild the socket at fd, 0 if not (the fd
// plugin makes it again or refuses the checkpoint naming it). A coordinated checkpoint's table is made in
// the drain phase. A standalone one's is made by the scan in our save, after the fd plugin's; whether the
// scan takes a socket depends on that socket alone, so it is classified alone now (a scratch table: the
// scan starts over) — else the fd plugin could not refuse what nobody restores, and it came back as a
// /dev/null stand-in.
extern "C" __attribute__((visibility("hidden"))) int revive_chan_takes(int fd) {
  using namespace revive::chan;
  if (g_drain_ran) return revive_chan_restores(fd) ? 1 : 0;
  g_nchans = 0;
  // A pty master is taken whatever its slave (rebuilt with it, or widowed); add_socket is for sockets.
  bool took = add_socket(fd) || (g_nchans == 1 && g_chans[0].fd == fd && g_chans[0].kind == kPtyMaster);
  g_nchans = 0;
  return took ? 1 : 0;
}

namespace revive::chan {

int rebuild_half_closed(uint64_t gen, char* msg, size_t cap) { return rebuild(gen, "chanh.", true, msg, cap); }

int reconnect(uint64_t gen, char* msg, size_t cap) {
  // Everything others wait for is published before this process waits for anything.
  if (int rc = portmap_publish(gen, msg, cap)) return rc;
  if (int rc = udp_publish(gen, msg, cap)) return rc;
  if (int rc = shares_listen(gen, msg, cap)) return rc;
  if (int rc = pipes_listen(gen, msg, cap)) return rc;
  if (int rc = ptys_listen(gen, msg, cap)) return rc;
  if (int rc = udp_connect(gen, msg, cap)) return rc;
  if (int rc = pipes_connect(gen, msg, cap)) return rc;
  if (int rc = shares_connect(gen, msg, cap)) return rc;
  if (int rc = ptys_connect(gen, msg, cap)) return rc;
  if (int rc = rebuild(gen, "chanr.", false, msg, cap)) return rc;
  if (int rc = backlog_reconnect(msg, cap)) return rc;  // every listener is bound again by now
  if (int rc = reopen_fifos(true, msg, cap)) return rc;
  if (int rc = place_local_aliases(msg, cap)) return rc;  // dups of the connections rebuilt above
  g_drained = true;  // the drained bytes (in restored memory) go back in the refill phase
  return 0;
}

}  // namespace revive::chan
