// Anonymous pipes between processes of the computation (`producer | consumer` under one launch, a pipe
// across fork). The bytes are drained and put back like a FIFO's (chan_fifo.cpp). What differs is the
// restart: a pipe has no name to reopen, so the reader creates a new one and hands its write end to every
// writer as a descriptor over a Unix socket (SCM_RIGHTS): nothing else can share one pipe between two
// processes that are not parent and child.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr int kPeerWaitMs = 2000;
constexpr int kHandOverTimeoutMs = 60000;

int pipe_err(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (pipe ").u(c.ino).s("): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

void key(char* out, size_t cap, const char* prefix, uint64_t gen, uint64_t ino) {
  plugins::Msg(out, cap).s(prefix).u(gen).s(".").u(ino);
}

bool pipe_end(const Chan& c) { return c.kind == kPipe || c.kind == kPipeOut; }

// Both ends in this process: the fd plugin's local-pipe policy, not ours.
bool local(uint32_t i) {
  for (uint32_t j = 0; j < g_nchans; ++j)
    if (j != i && pipe_end(g_chans[j]) && g_chans[j].ino == g_chans[i].ino &&
        is_reader(g_chans[j]) != is_reader(g_chans[i]))
      return true;
  return false;
}

// The first entry of this process for the same pipe end (dup'ed descriptors share one).
int first_same(uint32_t i) {
  for (uint32_t j = 0; j < i; ++j)
    if (g_chans[j].kind == kPipe && g_chans[j].ino == g_chans[i].ino && is_reader(g_chans[j]) == is_reader(g_chans[i]))
      return int(j);
  return -1;
}

int put_at(Chan& c, int s, char* msg, size_t cap) {
  if (dup3(s, c.fd, c.cloexec ? O_CLOEXEC : 0) < 0) return pipe_err(msg, cap, c, "cannot put it back at its number", errno);
  fcntl(c.fd, F_SETFL, c.flags & (O_NONBLOCK | O_APPEND | O_ASYNC));
  plugins::epoll_rewatch(c.fd);
  return 0;
}

}  // namespace

bool is_reader(const Chan& c) { return (c.flags & O_ACCMODE) != O_WRONLY; }

int handover_listen(const char* k, int* listen_fd) {
  char val[300];
  int s = listen_abstract(val, sizeof val);
  if (s < 0) return errno;
  *listen_fd = s;
  return inject::coord_publish(k, val) ? 0 : EIO;
}

int handover_reach(const char* k, char end, int timeout_ms, int* sock) {
  char val[300];
  int r = inject::coord_lookup(k, true, timeout_ms, val, sizeof val);
  if (r != 1) return r < 0 ? EIO : ETIMEDOUT;
  int s = connect_abstract(val);
  if (s < 0 || write(s, &end, 1) != 1) {
    int e = errno;
    if (s >= 0) close(s);
    return e ? e : EIO;
  }
  *sock = s;
  return 0;
}

}  // namespace revive::chan

// For the fd plugin's save (it runs before ours): a pipe with both ends in this process that another
// process of the computation holds too is ours to drain and rebuild; the fd plugin must not read its
// bytes (two processes peeking at one pipe at once would each see part of them). Counts the holders
// published in the drain phase (a barrier ago). False without a coordinated checkpoint.
extern "C" __attribute__((visibility("hidden"))) bool revive_chan_pipe_shared(uint64_t ino) {
  using namespace revive::chan;
  if (!g_drain_ran) return false;
  char k[96];
  key(k, sizeof k, "pipeh.", g_gen, ino);
  revive::plugins::Msg(k + strlen(k), sizeof k - strlen(k)).s(".");
  return revive::inject::coord_count(k, 10000) > 1;
}

namespace revive::chan {

// Drain phase: each end announces itself. Looking for the other end waits until save (write phase):
// by then every process has finished its drain (a barrier), so an answer "not found" is final at once,
// and a pipe to a reader or writer outside the computation (stdout to a terminal multiplexer, stderr to
// a test driver) costs no waiting.
// Readers publish their pid: the table keeps the last one published, which every reader reads back at
// save and which elects the one reader that drains (and on restart rebuilds) a pipe or FIFO.
// Every process holding an end of a pipe also publishes pipeh.<gen>.<ino>.<pid>: at save, a pipe with
// both ends here is ours alone (the fd plugin's local pipe) only if no other process holds it. After a
// fork both processes hold both ends until each closes the one it does not use (a shell's `$(...)`),
// and a checkpoint there must give both the same pipe again.
void publish_pipes(uint64_t gen) {
  char k[96], pid[24];
  plugins::Msg(pid, sizeof pid).u(uint64_t(getpid()));
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    c.shared = false;
    if (c.kind == kFifo && is_reader(c)) {
      key(k, sizeof k, "fifor.", gen, c.ino);
      inject::coord_publish(k, pid);
    }
    if (c.kind != kPipeOut) continue;
    key(k, sizeof k, "pipeh.", gen, c.ino);
    plugins::Msg(k + strlen(k), sizeof k - strlen(k)).s(".").s(pid);
    inject::coord_publish(k, "1");
    key(k, sizeof k, is_reader(c) ? "piper." : "pipew.", gen, c.ino);
    inject::coord_publish(k, is_reader(c) ? pid : "1");
  }
}

// Save: which pipe ends have their other end in the computation. Their writers are suspended until
// resume, so a reader can drain and put back its bytes now (chan_fifo.cpp); a pipe fed from outside is
// never touched (its writer keeps writing).
int classify_pipes(uint64_t gen, char* msg, size_t cap) {
  char k[96], val[24];
  for (uint32_t i = 0; i < g_nchans; ++i) {  // local pipes that another process holds too
    Chan& c = g_chans[i];
    if (c.kind != kPipeOut || !local(i)) continue;
    key(k, sizeof k, "pipeh.", gen, c.ino);
    plugins::Msg(k + strlen(k), sizeof k - strlen(k)).s(".");
    long n = inject::coord_count(k, 10000);
    if (n < 0) return pipe_err(msg, cap, c, "coordinator lost while counting the processes holding it", EIO);
    c.shared = n > 1;
  }
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kPipeOut || (local(i) && !c.shared)) continue;
    key(k, sizeof k, is_reader(c) ? "pipew." : "piper.", gen, c.ino);
    int r = inject::coord_lookup(k, false, 10000, val, sizeof val);
    if (r < 0) return pipe_err(msg, cap, c, "coordinator lost while looking up the other end", EIO);
    if (r == 1) c.kind = kPipe;
    // A reader whose writers have all closed (they exited: `echo x | tr ...` caught after echo ended):
    // what is left is its bytes and then end of file. Drained and rebuilt like a pipe of the
    // computation, with no writer to hand an end to: the new pipe's write end is closed after refill.
    if (r == 0 && is_reader(c)) {
      pollfd pf = {c.fd, POLLIN, 0};
      if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLHUP) != 0) c.kind = kPipe;
    }
  }
  char pid[24];
  plugins::Msg(pid, sizeof pid).u(uint64_t(getpid()));
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if ((c.kind != kPipe && c.kind != kFifo) || !is_reader(c)) continue;
    key(k, sizeof k, c.kind == kPipe ? "piper." : "fifor.", gen, c.ino);
    int r = inject::coord_lookup(k, false, 10000, val, sizeof val);
    if (r < 0) return pipe_err(msg, cap, c, "coordinator lost while looking up the reader that drains it", EIO);
    c.owner = r == 1 && strcmp(val, pid) == 0;
  }
  if (int rc = drain_buffered(kFifo, msg, cap)) return rc;
  return drain_buffered(kPipe, msg, cap);
}

int pipes_listen(uint64_t gen, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    c.pipe_w = c.listen_fd = -1;
    if (c.kind != kPipe || !c.owner) continue;
    if (int j = first_same(i); j >= 0) {  // a dup of a reader already rebuilt
      if (int rc = put_at(c, g_chans[j].fd, msg, cap)) return rc;
      continue;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return pipe_err(msg, cap, c, "pipe", errno);
    int rc = put_at(c, p[0], msg, cap);
    close(p[0]);
    if (rc) {
      close(p[1]);
      return rc;
    }
    c.pipe_w = p[1];
    char k[96];
    key(k, sizeof k, "chanp.", gen, c.ino);
    if (int e = handover_listen(k, &c.listen_fd)) return pipe_err(msg, cap, c, "cannot listen for its writers", e);
  }
  return 0;
}

int pipes_connect(uint64_t gen, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kPipe || c.owner || first_same(i) >= 0) continue;
    char k[96];
    key(k, sizeof k, "chanp.", gen, c.ino);
    const char end = is_reader(c) ? 'r' : 'w';  // which end of the new pipe we ask for
    // Our end arrives on c.listen_fd in the refill phase.
    if (int e = handover_reach(k, end, kHandOverTimeoutMs, &c.listen_fd))
      return pipe_err(msg, cap, c, e == ETIMEDOUT ? "the reader did not publish where to get the pipe"
                                                  : "cannot reach the reader", e);
  }
  return 0;
}

int pipes_hand_over(char* msg, size_t cap) {
  // Owners: every writer and other reader connected during reconnect (a barrier ago) and asked for an
  // end ('w' or 'r'): serve each, then drop the spare write end.
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kPipe || !c.owner || c.listen_fd < 0) continue;
    for (;;) {
      int s = accept4(c.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (s < 0) break;
      char one = 'p';
      if (wait_fd(s, POLLIN, kHandOverTimeoutMs) <= 0 || read(s, &one, 1) != 1 || (one != 'r' && one != 'w')) {
        close(s);
        return pipe_err(msg, cap, c, "a writer or reader connected but did not say which end it wants", EPROTO);
      }
      const int end = one == 'r' ? c.fd : c.pipe_w;
      bool sent = send_fd(s, end, one);
      int e = errno;
      close(s);
      if (!sent) return pipe_err(msg, cap, c, "cannot hand the pipe to a writer", e);
    }
    close(c.listen_fd);
    close(c.pipe_w);
    c.listen_fd = c.pipe_w = -1;
  }
  // Writers and the other readers: receive their end and put it at the old number.
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kPipe || c.owner) continue;
    if (int j = first_same(i); j >= 0) {
      if (int rc = put_at(c, g_chans[j].fd, msg, cap)) return rc;
      continue;
    }
    if (c.listen_fd < 0) continue;
    int fd = recv_fd(c.listen_fd, kHandOverTimeoutMs);
    close(c.listen_fd);
    c.listen_fd = -1;
    if (fd < 0) return pipe_err(msg, cap, c, "the reader did not hand over the pipe", ETIMEDOUT);
    int rc = put_at(c, fd, msg, cap);
    close(fd);
    if (rc) return rc;
  }
  return 0;
}

}  // namespace revive::chan
