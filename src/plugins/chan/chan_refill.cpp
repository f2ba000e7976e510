// Refill: every end sends the peer "[u64 n][the n bytes it drained]" and reads the same from the peer,
// exactly that many bytes, then writes the peer's bytes back into the connection, where they land in
// the peer's receive queue in their original order. Nothing else moves meanwhile (all threads held),
// and the bytes fitted in these buffers before, so the write-back completes without the peer reading.
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr int kRefillTimeoutMs = 60000;

bool soft(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EINTR); }

// A rebuilt connection starts with small buffers, which the bytes to write back may not fit while the
// peer is not reading: make the send buffer big enough for them (root may exceed wmem_max).
void grow_sndbuf(Chan& c) {
  int cur = 0;
  socklen_t l = sizeof cur;
  getsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &cur, &l);
  uint64_t need = 2 * c.want + (1 << 16);
  if (uint64_t(cur) >= need || need > (1u << 30)) return;
  int v = int(need);
  if (setsockopt(c.fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof v) != 0)
    setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

bool failed(const Chan& c, char* msg, size_t cap) {
  int e = errno;
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": refill: ").err(e);
  return false;
}

// One step of a message socket: the same exchange counted in datagrams ([u64 count], then each record as
// a datagram of its own), so boundaries and order survive. False on a hard error (message set).
bool step_msg(Chan& c, char* msg, size_t cap) {
  const uint64_t n = count_records(c.rx);
  while (c.sent < 1 + n) {
    if (c.sent == 0) {
      ssize_t w = send(c.fd, &n, 8, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (soft(w)) break;
      if (w != 8) goto fail;
    } else if (!send_record(c, c.rx, &c.tx_off)) {
      if (soft(-1)) break;
      goto fail;
    }
    ++c.sent;
  }
  while (c.got < 1 + c.want) {
    ssize_t len = next_msg_len(c);
    if (len == -EAGAIN || len == -EINTR) break;
    if (len < 0) {
      errno = int(-len);
      goto fail;
    }
    if (c.got == 0) {
      if (len != 8 || recv(c.fd, &c.want, 8, MSG_DONTWAIT) != 8 || c.want > (uint64_t(1) << 32)) {
        plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": malformed refill header from the peer");
        return false;
      }
    } else if (!recv_msg(c, c.back, size_t(len))) {
      goto fail;
    }
    ++c.got;
  }
  if (c.got == 1 + c.want && c.sent == 1 + n) {  // write back what the peer had not read
    while (c.wb_off < c.back.len) {
      if (send_record(c, c.back, &c.wb_off)) continue;
      if (soft(-1)) return true;
      goto fail;
    }
    c.done = true;
  }
  return true;
fail:
  return failed(c, msg, cap);
}

// One step; false on a hard error (message set).
bool step(Chan& c, char* msg, size_t cap) {
  if (is_msg(c)) return step_msg(c, msg, cap);
  const uint64_t n = c.rx.len;
  while (c.sent < 8 + n) {  // our header and drained bytes
    const uint8_t* p = c.sent < 8 ? reinterpret_cast<const uint8_t*>(&n) + c.sent : c.rx.p + (c.sent - 8);
    size_t len = c.sent < 8 ? 8 - c.sent : 8 + n - c.sent;
    ssize_t w = send(c.fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (soft(w)) break;
    if (w <= 0) goto fail;
    c.sent += size_t(w);
  }
  while (c.got < 8 + c.want) {  // the peer's header, then exactly its bytes
    ssize_t r;
    if (c.got < 8) {
      r = recv(c.fd, reinterpret_cast<uint8_t*>(&c.want) + c.got, 8 - c.got, MSG_DONTWAIT);
    } else {
      if (!c.back.reserve(c.want - c.back.len)) {
        plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": no memory for ").u(c.want).s(" bytes to refill");
        return false;
      }
      r = recv(c.fd, c.back.p + c.back.len, c.want - c.back.len, MSG_DONTWAIT);
      if (r > 0) c.back.len += size_t(r);
    }
    if (soft(r)) break;
    if (r == 0) {
      plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": the peer closed the connection during refill");
      return false;
    }
    if (r < 0) goto fail;
    c.got += size_t(r);
    if (c.got == 8 && c.want > (uint64_t(1) << 40)) {
      plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": refill header announces ").u(c.want).s(" bytes");
      return false;
    }
  }
  if (c.got == 8 + c.want && c.sent == 8 + n) {  // write back what the peer had not read
    while (c.back.len > 0) {
      ssize_t w = send(c.fd, c.back.p, c.back.len, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (soft(w)) {
        grow_sndbuf(c);
        return true;
      }
      if (w <= 0) goto fail;
      memmove(c.back.p, c.back.p + w, c.back.len - size_t(w));
      c.back.len -= size_t(w);
    }
    c.done = true;
  }
  return true;
fail:
  return failed(c, msg, cap);
}

// A rebuilt half-closed connection is complete when the peer's shutdown of its writing side has reached
// us (it comes after the bytes it wrote back). False after kShutWaitMs (message set).
constexpr int kShutWaitMs = 10000;

bool wait_shut(const Chan& c, char* msg, size_t cap) {
  const uint64_t deadline = now_ms() + kShutWaitMs;
  for (;;) {
    pollfd p = {c.fd, POLLRDHUP, 0};
    if (poll(&p, 1, 5) > 0 && (p.revents & (POLLRDHUP | POLLHUP))) return true;
    if (now_ms() > deadline) break;
  }
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": the peer did not shut its writing side again after the refill");
  return false;
}

// Our own SHUT_RD on TCP must wait for the peer's written-back bytes: once our receiving side is shut, a
// read with nothing queued yet gives end of file, before bytes the program has not read.
bool wait_queued(const Chan& c, size_t bytes, char* msg, size_t cap) {
  const uint64_t deadline = now_ms() + kShutWaitMs;
  for (;;) {
    int q = 0;
    if (ioctl(c.fd, SIOCINQ, &q) != 0 || size_t(q) >= bytes) return true;
    if (now_ms() > deadline) break;
    struct timespec ms = {0, 1000000};  // not poll(): readable already, with some of the bytes queued
    nanosleep(&ms, nullptr);
  }
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": the peer's ").u(bytes).s(" drained bytes did not come back after the refill");
  return false;
}

}  // namespace

int refill(bool restored, char* msg, size_t cap) {
  if (!g_drained) return 0;
  g_drained = false;
  if (restored) {
    // Hand our sockets to their other holders before waiting for anyone (they wait for us).
    if (int rc = shares_serve(msg, cap)) return rc;
    if (int rc = pipes_hand_over(msg, cap)) return rc;
    if (int rc = ptys_hand_over(msg, cap)) return rc;
    if (int rc = shares_receive(msg, cap)) return rc;
    if (int rc = put_back_fifos(0, false, msg, cap)) return rc;
  } else if (int rc = rebuild_half_closed(g_gen, msg, cap)) {  // a restored process rebuilt them all
    return rc;
  } else if (int rc2 = backlog_reconnect(msg, cap)) {  // a restored process did in reconnect
    return rc2;
  } else if (int rc3 = place_local_aliases(msg, cap)) {  // dups of a connection rebuilt just now
    return rc3;
  } else if (int rc4 = hand_rebuilt(msg, cap)) {  // other processes holding one (they take it at resume)
    return rc4;
  }
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    c.sent = c.got = c.tx_off = c.wb_off = 0;
    c.want = 0;
    c.back.clear();
    c.done = c.kind != kConn || c.fd < 0 || c.broken;  // broken: the drain gave it up (chan.h)
  }
  const uint64_t deadline = now_ms() + kRefillTimeoutMs;
  // A connection whose peer is gone (a rank killed during a failed checkpoint) must not end the refill
  // of the others: their peers wait for our half of the exchange, deaf to everything else, and gave up
  // only after the whole timeout. The first error is reported once the others are done.
  char first[256] = "";
  for (;;) {
    bool all = true;
    int pending = -1;
    short ev = 0;
    for (uint32_t i = 0; i < g_nchans; ++i) {
      Chan& c = g_chans[i];
      if (c.done) continue;
      if (!step(c, msg, cap)) {
        c.done = c.broken = true;
        if (!first[0]) plugins::Msg(first, sizeof first).s(msg);
        continue;
      }
      if (!c.done && pending < 0) {
        pending = c.fd;
        ev = short(c.got < (is_msg(c) ? 1 : 8) + c.want ? POLLIN : POLLOUT);
      }
      all = all && c.done;
    }
    if (all) break;
    if (now_ms() > deadline) {
      plugins::Msg(msg, cap).s("fd ").i(pending).s(": refill did not complete in time (peer not refilling?)");
      return -ETIMEDOUT;
    }
    wait_fd(pending, ev, 5);
  }
  // Half-closed: shut our writing sides again only now, after the peer's bytes were written back, so
  // the peer reads them and then its end of file, as before the checkpoint. All of them before any wait
  // below: a peer may be waiting for one of ours while we wait for one of its.
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind == kConn && !c.broken && c.wr_shut && shutdown(c.fd, SHUT_WR) != 0) {
      int e = errno;
      plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": cannot shut the writing side again: ").err(e);
      return -e;
    }
  }
  // Then the ends whose receiving side was shut. Each must be as before the checkpoint *before* this
  // process resumes, not merely soon: a program polling its shut end reads "nothing yet" (EAGAIN) where
  // it read end of file, if it runs before the peer's write-back or shutdown lands.
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    const size_t drained = c.rx.len;
    c.rx.clear();
    if (c.kind != kConn || c.fd < 0 || c.broken || c.reset) continue;
    const bool unix_end = c.family == AF_UNIX;
    if (c.eof || (unix_end && c.rd_shut)) {
      // The peer shut its writing side (on a Unix connection our RCV bit always means that, or comes with
      // it): it does so again right after writing our bytes back, so its shutdown reaching us (RDHUP)
      // says both have landed.
      if (!wait_shut(c, msg, cap)) return -ETIMEDOUT;
    } else if (c.rd_shut && !wait_queued(c, drained, msg, cap)) {
      return -ETIMEDOUT;  // TCP, our own SHUT_RD: the peer's bytes must be queued before we shut
    }
    // Our receiving side, once the peer's in-flight bytes are back in the queue: the program reads
    // them, then its end of file.
    if (c.rd_shut && shutdown(c.fd, SHUT_RD) != 0) {
      int e = errno;
      plugins::Msg(msg, cap).s("fd ").i(c.fd).s(": cannot shut the receiving side again: ").err(e);
      return -e;
    }
  }
  if (first[0]) {
    plugins::Msg(msg, cap).s(first);
    return -EIO;
  }
  return 0;
}

}  // namespace revive::chan
