// Socket I/O that the engine's checkpoint signal must not cut short. The engine's handler is installed
// with SA_RESTART, so a blocked read or write normally goes on by itself; but a socket with a receive or
// send timeout (SO_RCVTIMEO/SO_SNDTIMEO) is the kernel's exception: its calls fail with EINTR whatever
// SA_RESTART says (signal(7)). libfabric's fi_pingpong reads its control socket that way and gave up at
// the first checkpoint ("ctrl/read(): Interrupted system call"). Each wrapper calls libc's function and
// goes on when only the engine's signal interrupted it (signal_wrappers.h: engine_only); nothing was
// transferred then (a partial transfer returns its count, not EINTR). It goes on by waiting (poll, itself
// resumed) for the socket to become ready until the socket's own timeout, counted from the first
// interruption, is over: then it fails with EAGAIN as the kernel's timeout would have; when the socket is
// ready the call is made again. Redoing the call at once instead would never end under checkpoints more
// frequent than the timeout (engine.sleeps_ckpt100 hung so). A wait a checkpoint cut lasts at most one
// timeout longer than without it (the time before the interruption is not measured: no clock read on the
// fast path). An interruption by a handler of the program returns EINTR as without revive.
// Not here: recvmsg/sendmsg (the vpid plugin's wrappers, which translate credentials) and connect (an
// interrupted connect goes on in the background and cannot be called again).
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plugins/common/dgram_route.h"
#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/common/sigfd_set.h"
#include "plugins/signal/signal_wrappers.h"
#include "plugins/vpid/vpid.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

using ReadFn = ssize_t (*)(int, void*, size_t);
using ReadvFn = ssize_t (*)(int, const struct iovec*, int);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using RecvFn = ssize_t (*)(int, void*, size_t, int);
using SendFn = ssize_t (*)(int, const void*, size_t, int);
using RecvfromFn = ssize_t (*)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
using SendtoFn = ssize_t (*)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
using AcceptFn = int (*)(int, struct sockaddr*, socklen_t*);
using Accept4Fn = int (*)(int, struct sockaddr*, socklen_t*, int);

ReadFn g_read;
ReadvFn g_readv;
WriteFn g_write;
RecvFn g_recv;
SendFn g_send;
RecvfromFn g_recvfrom;
SendtoFn g_sendto;
AcceptFn g_accept;
Accept4Fn g_accept4;

// call() on fd (`in`: a receive) until it does not fail with an EINTR that only the engine caused.
template <typename Call>
auto redo(int fd, bool in, Call call) -> decltype(call()) {
  Interruptions before = interruptions_now();
  auto r = call();
  if (r >= 0 || !engine_only(before, errno)) return r;
  // Interrupted by a checkpoint: the socket's timeout (none, or not a socket: the call is simply redone).
  struct timeval tv = {0, 0};
  socklen_t len = sizeof tv;
  Deadline d{true, 0, 0};  // the wait wrappers' deadline (signal_wrappers.h)
  if (getsockopt(fd, SOL_SOCKET, in ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &len) == 0 && (tv.tv_sec || tv.tv_usec))
    d = deadline_in(int64_t(tv.tv_sec) * 1000000000 + int64_t(tv.tv_usec) * 1000);
  for (;;) {
    if (!d.forever) {
      const int left = left_ms(d);
      struct pollfd p = {fd, short(in ? POLLIN : POLLOUT), 0};
      if (left <= 0 || poll(&p, 1, left) == 0) {  // poll: our wrapper, resumed across checkpoints
        errno = EAGAIN;
        return -1;
      }
    }
    before = interruptions_now();
    r = call();
    if (r >= 0 || !engine_only(before, errno)) return r;
  }
}

}  // namespace

void signalfd_made(int fd) { sigfd_mark(fd); }

// Each whole signalfd_siginfo among the n bytes read from fd into the iovecs: its sender as the program
// knows it. A record may straddle two iovecs (readv), so its fields are gathered and scattered by offset.
void signalfd_readv(int fd, const struct iovec* iov, int cnt, long n, vpid::CallStart c) {
  if (!vpid::active() || !sigfd_is(fd, n)) return;
  const uint32_t ep = vpid::answered_in(c);
  auto at = [&](long off, void* p, size_t len, bool put) {
    for (int i = 0; i < cnt && len > 0; ++i) {
      const long l = long(iov[i].iov_len);
      if (off >= l) {
        off -= l;
        continue;
      }
      const size_t k = size_t(l - off) < len ? size_t(l - off) : len;
      char* b = static_cast<char*>(iov[i].iov_base) + off;
      if (put) memcpy(b, p, k);
      else memcpy(p, b, k);
      p = static_cast<char*>(p) + k;
      len -= k;
      off = 0;
    }
  };
  for (long r = 0; r + long(sizeof(signalfd_siginfo)) <= n; r += long(sizeof(signalfd_siginfo))) {
    uint32_t signo = 0, pid = 0;  // all read back: n covers every byte of the record
    int32_t code = 0;
    at(r + long(offsetof(signalfd_siginfo, ssi_signo)), &signo, sizeof signo, false);
    at(r + long(offsetof(signalfd_siginfo, ssi_code)), &code, sizeof code, false);
    at(r + long(offsetof(signalfd_siginfo, ssi_pid)), &pid, sizeof pid, false);
    pid = uint32_t(vpid::virtual_sender_since(int(signo), code, pid_t(pid), ep));
    at(r + long(offsetof(signalfd_siginfo, ssi_pid)), &pid, sizeof pid, true);
  }
}

void signalfd_read(int fd, void* buf, long n, vpid::CallStart c) {
  struct iovec v = {buf, size_t(n)};
  signalfd_readv(fd, &v, 1, n, c);
}

void io_wrappers_init() {
  next_symbol(&g_read, "read");
  next_symbol(&g_readv, "readv");
  next_symbol(&g_write, "write");
  next_symbol(&g_recv, "recv");
  next_symbol(&g_send, "send");
  next_symbol(&g_recvfrom, "recvfrom");
  next_symbol(&g_sendto, "sendto");
  next_symbol(&g_accept, "accept");
  next_symbol(&g_accept4, "accept4");
}

}  // namespace revive::plugins

using revive::plugins::next_or_enosys;
using revive::plugins::redo;

// A signalfd read blocks in a restartable call: each attempt notes where it began (vpid.h, answered_in),
// so that senders are translated with the ids of the incarnation that answered.
REVIVE_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  auto f = next_or_enosys(&revive::plugins::g_read, "read");
  revive::vpid::CallStart c{};
  ssize_t r = f ? redo(fd, true, [&] {
    c = revive::vpid::call_start();
    return f(fd, buf, n);
  }) : -1;
  if (r > 0) revive::plugins::signalfd_read(fd, buf, r, c);
  return r;
}

// readv: as read (a signalfd reads through read_iter since Linux 6.8, so readv returns records too).
REVIVE_EXPORT ssize_t readv(int fd, const struct iovec* iov, int cnt) {
  auto f = next_or_enosys(&revive::plugins::g_readv, "readv");
  revive::vpid::CallStart c{};
  ssize_t r = f ? redo(fd, true, [&] {
    c = revive::vpid::call_start();
    return f(fd, iov, cnt);
  }) : -1;
  if (r > 0) revive::plugins::signalfd_readv(fd, iov, cnt, r, c);
  return r;
}

// A program built with _FORTIFY_SOURCE (Debian's packages are) calls __read_chk where the buffer's size
// is known; glibc's own __read_chk calls its internal read, past our wrapper. Same check, then ours.
extern "C" [[noreturn]] void __chk_fail();
REVIVE_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return read(fd, buf, n);
}

// The fortified receives (see __read_chk): the same check, then our wrappers.
REVIVE_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __chk_fail();
  return recv(fd, buf, n, flags);
}

REVIVE_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, struct sockaddr* from,
                                     socklen_t* len) {
  if (n > buflen) __chk_fail();
  return recvfrom(fd, buf, n, flags, from, len);
}

REVIVE_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  auto f = next_or_enosys(&revive::plugins::g_write, "write");
  return f ? redo(fd, false, [&] { return f(fd, buf, n); }) : -1;
}

REVIVE_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  auto f = next_or_enosys(&revive::plugins::g_recv, "recv");
  return f ? redo(fd, true, [&] { return f(fd, buf, n, flags); }) : -1;
}

REVIVE_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  auto f = next_or_enosys(&revive::plugins::g_send, "send");
  return f ? redo(fd, false, [&] { return f(fd, buf, n, flags); }) : -1;
}

// recvfrom/sendto: also the channels plugin's datagram routes (a UDP peer restarted on another host is
// still named by its old address: plugins/common/dgram_route.h).
REVIVE_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* from, socklen_t* len) {
  auto f = next_or_enosys(&revive::plugins::g_recvfrom, "recvfrom");
  const socklen_t cap = from && len ? *len : 0;
  ssize_t r = f ? redo(fd, true, [&] {
    if (from && len) *len = cap;  // asked again after an interruption: the program's size again
    return f(fd, buf, n, flags, from, len);
  }) : -1;
  if (r >= 0 && from && len) revive::plugins::dgram_from(from, cap, *len, flags);
  return r;
}

REVIVE_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* to, socklen_t len) {
  auto f = next_or_enosys(&revive::plugins::g_sendto, "sendto");
  struct sockaddr_storage moved;
  const struct sockaddr* at = revive::plugins::dgram_to(to, len, &moved);
  return f ? redo(fd, false, [&] { return f(fd, buf, n, flags, at, len); }) : -1;
}

REVIVE_EXPORT int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  auto f = next_or_enosys(&revive::plugins::g_accept, "accept");
  return f ? redo(fd, true, [&] { return f(fd, addr, len); }) : -1;
}

REVIVE_EXPORT int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  auto f = next_or_enosys(&revive::plugins::g_accept4, "accept4");
  return f ? redo(fd, true, [&] { return f(fd, addr, len, flags); }) : -1;
}
