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
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/signal/signal_wrappers.h"
#include "plugins/vpid/vpid.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

using ReadFn = ssize_t (*)(int, void*, size_t);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using RecvFn = ssize_t (*)(int, void*, size_t, int);
using SendFn = ssize_t (*)(int, const void*, size_t, int);
using RecvfromFn = ssize_t (*)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
using SendtoFn = ssize_t (*)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
using AcceptFn = int (*)(int, struct sockaddr*, socklen_t*);
using Accept4Fn = int (*)(int, struct sockaddr*, socklen_t*, int);

ReadFn g_read;
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

// Signalfds: one bit per descriptor below 1024. A bit can outlive its descriptor (close is not wrapped),
// so a read checks that the descriptor still is a signalfd before it touches the bytes; the check costs a
// readlink, paid only by reads of signalfds while virtual pids are active.
static uint64_t g_sigfd_bits[16];

void signalfd_made(int fd) {
  if (fd >= 0 && fd < 1024) __atomic_or_fetch(&g_sigfd_bits[fd / 64], uint64_t{1} << (fd % 64), __ATOMIC_RELAXED);
}

void signalfd_read(int fd, void* buf, long n) {
  if (fd < 0 || fd >= 1024 || !vpid::active() || n % long(sizeof(signalfd_siginfo)) != 0) return;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (!(__atomic_load_n(&g_sigfd_bits[fd / 64], __ATOMIC_RELAXED) & bit)) return;
  char path[32], target[32];
  Msg(path, sizeof path).s("/proc/self/fd/").i(fd);
  long l = syscall(SYS_readlinkat, AT_FDCWD, path, target, sizeof target - 1);
  static const char kName[] = "anon_inode:[signalfd]";
  if (l != long(sizeof kName - 1) || memcmp(target, kName, sizeof kName - 1) != 0) {
    __atomic_and_fetch(&g_sigfd_bits[fd / 64], ~bit, __ATOMIC_RELAXED);  // closed and reused
    return;
  }
  auto* si = static_cast<signalfd_siginfo*>(buf);
  for (long i = 0; i < n / long(sizeof *si); ++i)
    si[i].ssi_pid = uint32_t(vpid::virtual_sender(int(si[i].ssi_signo), si[i].ssi_code, pid_t(si[i].ssi_pid)));
}

void io_wrappers_init() {
  next_symbol(&g_read, "read");
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

REVIVE_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  auto f = next_or_enosys(&revive::plugins::g_read, "read");
  ssize_t r = f ? redo(fd, true, [&] { return f(fd, buf, n); }) : -1;
  if (r > 0) revive::plugins::signalfd_read(fd, buf, r);
  return r;
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

REVIVE_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* from, socklen_t* len) {
  auto f = next_or_enosys(&revive::plugins::g_recvfrom, "recvfrom");
  return f ? redo(fd, true, [&] { return f(fd, buf, n, flags, from, len); }) : -1;
}

REVIVE_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* to, socklen_t len) {
  auto f = next_or_enosys(&revive::plugins::g_sendto, "sendto");
  return f ? redo(fd, false, [&] { return f(fd, buf, n, flags, to, len); }) : -1;
}

REVIVE_EXPORT int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  auto f = next_or_enosys(&revive::plugins::g_accept, "accept");
  return f ? redo(fd, true, [&] { return f(fd, addr, len); }) : -1;
}

REVIVE_EXPORT int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  auto f = next_or_enosys(&revive::plugins::g_accept4, "accept4");
  return f ? redo(fd, true, [&] { return f(fd, addr, len, flags); }) : -1;
}
