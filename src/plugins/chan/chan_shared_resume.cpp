// Sockets held by several processes that the original process rebuilds at resume: a half-closed
// connection (rebuild_half_closed, chan_connect.cpp) and a client whose connection sat in a listener's
// backlog (backlog_reconnect, chan_backlog.cpp). The owner makes a new socket and the old one's peer is
// closed, so every other holder must get the new socket before its threads run, or it goes on with the
// old one: an early end of file, bytes sent to nobody. (A restart needs none of this: there every holder
// gets the owner's socket in reconnect/refill, chan_shared.cpp.)
// The owner must not wait for the others (it does not know how many there are, and they wait for its
// refill), so the others listen first: at save each other holder of a connection listens on an abstract
// Unix socket, published as "sockh.<G>.<host>.<ino>.<pid>". At resume (every save is over, a barrier ago)
// the owner, once its socket is rebuilt, walks those keys and sends the socket to each (SCM_RIGHTS: the
// connect and the send complete without the holder's accept). A holder takes it once the owner has said
// its refill is over ("sockr.", wait_refilled), before its threads are released.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr int kTakeTimeoutMs = 10000;  // the socket was queued before "sockr." was published

int fail(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (socket held by several processes, rebuilt at resume): ").s(what)
      .s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

bool rebuilt_at_resume(const Chan& c) {
  return c.alias == 0 && c.fd >= 0 && ((c.kind == kConn && c.rebuild) || c.kind == kBacklog);
}

}  // namespace

int listen_for_rebuilt(Chan& c, uint64_t gen, char* msg, size_t cap) {
  char k[128], v[300];
  int s = listen_abstract(v, sizeof v);
  if (s < 0) return fail(msg, cap, c, "cannot listen for the rebuilt socket", errno);
  share_key(k, sizeof k, "sockh.", gen, c.ino);
  plugins::Msg(k + strlen(k), sizeof k - strlen(k)).s(".").u(uint64_t(getpid()));
  if (!inject::coord_publish(k, v)) {
    close(s);
    return fail(msg, cap, c, "cannot publish where to hand the rebuilt socket", EIO);
  }
  c.share_fd = s;
  return 0;
}

int hand_rebuilt(char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    const Chan& c = g_chans[i];
    if (!rebuilt_at_resume(c)) continue;
    char prefix[128], at[128], v[300];
    share_key(prefix, sizeof prefix, "sockh.", g_gen, c.ino);
    plugins::Msg(prefix + strlen(prefix), sizeof prefix - strlen(prefix)).s(".");
    plugins::Msg(at, sizeof at).s(prefix);
    for (;;) {
      int r = inject::coord_next(prefix, at, kTakeTimeoutMs, at, sizeof at, v, sizeof v);
      if (r < 0) return fail(msg, cap, c, "coordinator lost while looking up the other holders", EIO);
      if (r == 0) break;
      // One holder that cannot be reached (gone since its save) must not cost the others, or our own
      // refill, which runs after this: warn and go on.
      int s = connect_abstract(v);
      bool sent = s >= 0 && send_fd(s, c.fd, 'h');
      int e = errno;
      if (s >= 0) close(s);
      if (!sent) {
        char line[400];
        fail(line, sizeof line, c, "cannot hand the rebuilt socket to another holder", e);
        plugins::Msg(line + strlen(line), sizeof line - strlen(line)).s(" (").s(at).s("; it keeps the old socket)");
        plugins::warn(line);
      }
    }
  }
  return 0;
}

int take_rebuilt(char* msg, size_t cap) {
  int rc = 0;
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kAlias || c.alias != 2 || !c.alias_conn || c.share_fd < 0) continue;
    // Nothing queued: the owner did not rebuild it (the old socket is still the connection).
    int s = accept4(c.share_fd, nullptr, nullptr, SOCK_CLOEXEC);
    close(c.share_fd);
    c.share_fd = -1;
    if (s < 0 || rc != 0) {
      if (s >= 0) close(s);
      continue;
    }
    int fd = recv_fd(s, kTakeTimeoutMs);
    close(s);
    if (fd < 0) rc = fail(msg, cap, c, "the owner connected but sent no socket", EPROTO);
    else rc = place_socket(c, fd, msg, cap);
  }
  if (rc != 0) return rc;
  return place_local_aliases(msg, cap);  // our dups of it
}

}  // namespace revive::chan
