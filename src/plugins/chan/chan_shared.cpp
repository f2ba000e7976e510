// Sockets held more than once: at several numbers of one process (dup), or by several processes of the
// computation (inherited across fork and exec). MPICH's hydra launcher is the common case: mpiexec's
// listener and its connection to hydra_pmi_proxy are not close-on-exec, so the proxy and every rank hold
// them too. A socket has one open file description (it cannot be opened again), so its inode names it.
// Exactly one entry may send the drain marker, drain, refill and rebuild it: with one marker per holder
// the peer stopped at the first, the others reached its program (or its refill, as a refill header of
// 0x4e494152445652ff bytes), and the bytes in flight were split between the holders.
// Dups are found as the table is built (consider, alias 1). Across processes the coordinator elects: in
// the drain phase every holder publishes "socko.<G>.<host>.<ino>" = its pid, at save (a barrier later)
// the pid the table kept owns the socket and the others mark it alias 2. On restart the owner rebuilds it
// like any socket (listener: at restore; connection: in reconnect; outside peer: closed) and hands it to
// every other holder over an abstract Unix socket (SCM_RIGHTS), as pipes are handed over (chan_pipe.cpp).
// What the original process rebuilds at resume (half-closed, backlog clients) is handed over likewise
// (chan_shared_resume.cpp).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/host_tag.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr int kHandOverTimeoutMs = 60000;

// The entries a holder elects: one per socket in this process (dups follow their entry).
bool electable(const Chan& c) {
  return c.alias == 0 && (c.kind == kOutside || c.kind == kListen || c.kind == kDgramBound);
}

// What the owner rebuilds and hands over on restart.
bool owned_socket(const Chan& c) {
  return c.alias == 0 && c.fd >= 0 &&
         (c.kind == kConn || c.kind == kListen || c.kind == kOutside || c.kind == kBacklog || c.kind == kDgramBound);
}

int fail(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (socket held by several processes): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

bool same_file(int a, int b) {
  struct stat x, y;
  return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

}  // namespace

void share_key(char* out, size_t cap, const char* prefix, uint64_t gen, uint64_t ino) {
  // Socket inodes are numbered per kernel: the host tag keeps two hosts' sockets apart, and being cached in
  // memory (warmed in publish_sockets), names them after a restart on another host as their holders did.
  plugins::Msg(out, cap).s(prefix).u(gen).s(".").s(plugins::host_tag()).s(".").u(ino);
}

// Descriptor passing, for pipes (chan_pipe.cpp) and shared sockets alike.
namespace {

// A one-byte message with room for one descriptor (SCM_RIGHTS).
struct FdMsg {
  explicit FdMsg(char* byte) : io{byte, 1} {
    memset(&m, 0, sizeof m);
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
  }
  iovec io;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  msghdr m;
};

}  // namespace

int listen_abstract(char* hexaddr, size_t cap) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un a;
  socklen_t len = sizeof a;
  sa_family_t fam = AF_UNIX;
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&fam), sizeof fam) != 0 || listen(s, SOMAXCONN) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int e = errno;
    if (s >= 0) close(s);
    errno = e;
    return -1;
  }
  hex(hexaddr, cap, &a, len);
  return s;
}

int connect_abstract(const char* hexaddr) {
  sockaddr_un a;
  memset(&a, 0, sizeof a);
  size_t n = 0;
  unhex(hexaddr, reinterpret_cast<uint8_t*>(&a), sizeof a, &n);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&a), socklen_t(n)) != 0) {
    int e = errno;
    if (s >= 0) close(s);
    errno = e;
    return -1;
  }
  return s;
}

bool send_fd(int s, int fd, char byte) {
  FdMsg fm(&byte);
  cmsghdr* cm = CMSG_FIRSTHDR(&fm.m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  return sendmsg(s, &fm.m, MSG_NOSIGNAL) == 1;
}

int recv_fd(int s, int timeout_ms) {
  int fd = -1;
  if (wait_fd(s, POLLIN, timeout_ms) > 0) {
    char one;
    FdMsg fm(&one);
    if (recvmsg(s, &fm.m, MSG_CMSG_CLOEXEC) == 1) {
      cmsghdr* cm = CMSG_FIRSTHDR(&fm.m);
      if (cm && cm->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    }
  }
  return fd;
}

void publish_sockets(uint64_t gen) {
  plugins::host_tag();
  char k[96], pid[24];
  plugins::Msg(pid, sizeof pid).u(uint64_t(getpid()));
  for (uint32_t i = 0; i < g_nchans; ++i) {
    if (!electable(g_chans[i])) continue;
    share_key(k, sizeof k, "socko.", gen, g_chans[i].ino);
    inject::coord_publish(k, pid);
  }
}

int elect_sockets(uint64_t gen, char* msg, size_t cap) {
  char k[96], val[24], pid[24];
  plugins::Msg(pid, sizeof pid).u(uint64_t(getpid()));
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!electable(c)) continue;
    share_key(k, sizeof k, "socko.", gen, c.ino);
    int r = inject::coord_lookup(k, false, 10000, val, sizeof val);
    if (r < 0) return fail(msg, cap, c, "coordinator lost while looking up which process drains it", EIO);
    if (r == 1 && strcmp(val, pid) != 0) {
      c.alias_conn = c.kind == kOutside;
      c.kind = kAlias;
      c.alias = 2;
      // Its owner may rebuild it at resume (half-closed, backlog client): be ready to get that socket.
      if (c.alias_conn)
        if (int rc = listen_for_rebuilt(c, gen, msg, cap)) return rc;
    }
  }
  return 0;
}

void publish_refilled() {
  char k[96];
  for (uint32_t i = 0; i < g_nchans; ++i) {
    const Chan& c = g_chans[i];
    if (c.alias != 0 || (c.kind != kConn && c.kind != kOutside && c.kind != kBacklog)) continue;
    share_key(k, sizeof k, "sockr.", g_gen, c.ino);
    inject::coord_publish(k, "1");
  }
}

int wait_refilled(char* msg, size_t cap) {
  char k[96], v[8];
  for (uint32_t i = 0; i < g_nchans; ++i) {
    const Chan& c = g_chans[i];
    if (c.kind != kAlias || c.alias != 2 || !c.alias_conn) continue;
    share_key(k, sizeof k, "sockr.", g_gen, c.ino);
    int r = inject::coord_lookup(k, true, kHandOverTimeoutMs, v, sizeof v);
    if (r != 1) return fail(msg, cap, c, "the process that refills it did not say it is done", r < 0 ? EIO : ETIMEDOUT);
  }
  return 0;
}

int shares_listen(uint64_t gen, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    c.share_fd = -1;
    if (!owned_socket(c)) continue;
    // Every owner listens: whether another process held the socket is not in the image (the holders
    // learned their roles at save, when the images were being written), and a listener costs only a
    // restart a socket and a PUBLISH per socket.
    char k[96], v[300];
    int s = listen_abstract(v, sizeof v);
    if (s < 0) return fail(msg, cap, c, "cannot listen for the other holders", errno);
    c.share_fd = s;
    share_key(k, sizeof k, "chans.", gen, c.ino);
    if (!inject::coord_publish(k, v)) return fail(msg, cap, c, "cannot publish", EIO);
  }
  return 0;
}

int shares_connect(uint64_t gen, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kAlias || c.alias != 2) continue;
    c.share_fd = -1;
    char k[96], v[300];
    share_key(k, sizeof k, "chans.", gen, c.ino);
    int r = inject::coord_lookup(k, true, kHandOverTimeoutMs, v, sizeof v);
    if (r != 1) return fail(msg, cap, c, "the process that rebuilds it did not say where to get it", r < 0 ? EIO : ETIMEDOUT);
    int s = connect_abstract(v);
    if (s < 0) return fail(msg, cap, c, "cannot reach the process that rebuilds it", errno);
    c.share_fd = s;  // the socket arrives on it in the refill phase
  }
  return 0;
}

int shares_serve(char* msg, size_t cap) {
  // Every holder connected in reconnect (a barrier ago): serve those queued, never wait for more.
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind == kAlias || c.share_fd < 0) continue;
    for (;;) {
      int s = accept4(c.share_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (s < 0) break;
      bool sent = send_fd(s, c.fd, 's');
      int e = errno;
      close(s);
      if (!sent) return fail(msg, cap, c, "cannot hand it to another holder", e);
    }
    close(c.share_fd);
    c.share_fd = -1;
  }
  return 0;
}

int shares_receive(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kAlias || c.alias != 2 || c.share_fd < 0) continue;
    int fd = recv_fd(c.share_fd, kHandOverTimeoutMs);
    close(c.share_fd);
    c.share_fd = -1;
    if (fd < 0) return fail(msg, cap, c, "the process that rebuilds it did not hand it over", ETIMEDOUT);
    if (int rc = place_socket(c, fd, msg, cap)) return rc;
  }
  return place_local_aliases(msg, cap);
}

int place_local_aliases(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kAlias || c.alias != 1) continue;
    const Chan& o = g_chans[c.alias_of];
    // Not rebuilt (yet, or ever: a connection restored without a coordinator), or already in place.
    if (o.fd < 0 || o.kind == kGone || is_stand_in(o.fd) || same_file(o.fd, c.fd)) continue;
    int s = fcntl(o.fd, F_DUPFD_CLOEXEC, 0);
    if (s < 0) return fail(msg, cap, c, "dup", errno);
    if (int rc = place_socket(c, s, msg, cap)) return rc;
  }
  return 0;
}

}  // namespace revive::chan
