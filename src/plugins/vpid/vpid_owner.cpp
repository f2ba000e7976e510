// Ids inside other calls' arguments and results: fcntl F_SETOWN/F_GETOWN (a pid, or -pgid) and
// F_SETOWN_EX/F_GETOWN_EX (a tid, pid or pgid), getsockopt SO_PEERCRED and recvmsg SCM_CREDENTIALS (the
// peer's pid, when it is a process of the computation), sendmsg SCM_CREDENTIALS (the kernel checks that
// the pid sent is the sender's own kernel pid). And F_SETFL clearing O_APPEND, for the files plugin's
// pre-images (files_pre.h).
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "plugins/common/dgram_route.h"
#include "plugins/common/next_symbol.h"
#include "plugins/common/sigfd_set.h"
#include "plugins/files/files_pre.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
using revive::plugins::next_or_enosys;
namespace vpid = revive::vpid;

using FcntlFn = int (*)(int, int, ...);
using GetsockoptFn = int (*)(int, int, int, void*, socklen_t*);
using RecvmsgFn = ssize_t (*)(int, struct msghdr*, int);
using SendmsgFn = ssize_t (*)(int, const struct msghdr*, int);
using RecvmmsgFn = int (*)(int, struct mmsghdr*, unsigned, int, struct timespec*);
using SendmmsgFn = int (*)(int, struct mmsghdr*, unsigned, int);
FcntlFn g_fcntl;
RecvmmsgFn g_recvmmsg;
SendmmsgFn g_sendmmsg;
GetsockoptFn g_getsockopt;
RecvmsgFn g_recvmsg;
SendmsgFn g_sendmsg;
VPID_PRIME(g_fcntl, "fcntl")
VPID_PRIME(g_getsockopt, "getsockopt")
VPID_PRIME(g_recvmsg, "recvmsg")
VPID_PRIME(g_sendmsg, "sendmsg")
VPID_PRIME(g_recvmmsg, "recvmmsg")
VPID_PRIME(g_sendmmsg, "sendmmsg")

// Owner kinds of f_owner_ex: F_OWNER_TID 0, F_OWNER_PID 1, F_OWNER_PGRP 2 (all positive ids).
int fcntl_with(FcntlFn* slot, const char* name, int fd, int cmd, va_list ap) {
  FcntlFn f = next_or_enosys(slot, name);
  if (!f) return -1;
  // Every fcntl command takes at most one argument, an int or a pointer: pass it on as a pointer-sized
  // word (the kernel's ABI), translated for the owner commands.
  void* arg = va_arg(ap, void*);
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {  // a copy of a signalfd is one (sigfd_set.h)
    int r = f(fd, cmd, arg);
    if (r >= 0) revive::plugins::sigfd_copied(fd, r);
    return r;
  }
  // Clearing O_APPEND lets writes land before the end: a file kept by its size only needs its copy.
  if (cmd == F_SETFL && !(reinterpret_cast<long>(arg) & O_APPEND)) revive::plugins::pre_setfl(fd);
  if (!vpid::active()) return f(fd, cmd, arg);
  switch (cmd) {
    case F_SETOWN:
      return f(fd, cmd, vpid::to_real_signed(pid_t(reinterpret_cast<long>(arg))));
    case F_GETOWN:
      return vpid::asked([f, fd, cmd] {
        int r = f(fd, cmd);
        return r > 0 ? vpid::to_virt(r) : r < -1 ? -vpid::to_virt(-r) : r;
      });
    case F_SETOWN_EX: {
      auto* o = static_cast<const struct f_owner_ex*>(arg);
      if (!o) return f(fd, cmd, arg);
      struct f_owner_ex k = *o;
      k.pid = vpid::to_real(k.pid);
      return f(fd, cmd, &k);
    }
    case F_GETOWN_EX:
      return vpid::asked([f, fd, cmd, arg] {
        int r = f(fd, cmd, arg);
        auto* o = static_cast<struct f_owner_ex*>(arg);
        if (r == 0 && o) o->pid = vpid::to_virt(o->pid);
        return r;
      });
    default:
      return f(fd, cmd, arg);
  }
}

void creds_back(struct msghdr* m) {
  for (struct cmsghdr* c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
      auto* u = reinterpret_cast<struct ucred*>(CMSG_DATA(c));
      u->pid = vpid::to_virt(u->pid);
    }
}

}  // namespace

REVIVE_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  int r = fcntl_with(&g_fcntl, "fcntl", fd, cmd, ap);
  va_end(ap);
  return r;
}

// The same function on 64-bit glibc (large-file variant).
REVIVE_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

REVIVE_EXPORT int getsockopt(int fd, int level, int name, void* val, socklen_t* len) noexcept {
  GetsockoptFn f = next_or_enosys(&g_getsockopt, "getsockopt");
  if (!f) return -1;
  if (level != SOL_SOCKET || name != SO_PEERCRED) return f(fd, level, name, val, len);
  const socklen_t cap = len ? *len : 0;
  return vpid::asked([&] {
    if (len) *len = cap;
    int r = f(fd, level, name, val, len);
    if (r == 0 && vpid::active() && val && len && *len >= sizeof(struct ucred)) {
      auto* u = static_cast<struct ucred*>(val);
      u->pid = vpid::to_virt(u->pid);
    }
    return r;
  });
}

REVIVE_EXPORT ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
  RecvmsgFn f = next_or_enosys(&g_recvmsg, "recvmsg");
  if (!f) return -1;
  const socklen_t cap = m && m->msg_name ? m->msg_namelen : 0;
  ssize_t r = f(fd, m, flags);
  if (r >= 0 && vpid::active() && m && m->msg_control) creds_back(m);
  if (r >= 0 && m && m->msg_name) revive::plugins::dgram_from(static_cast<struct sockaddr*>(m->msg_name), cap, m->msg_namelen, flags);
  return r;
}

REVIVE_EXPORT ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  SendmsgFn f = next_or_enosys(&g_sendmsg, "sendmsg");
  if (!f) return -1;
  // A UDP peer restarted on another host, named by its old address (plugins/common/dgram_route.h).
  struct sockaddr_storage moved;
  struct msghdr routed;
  if (m && m->msg_name) {
    const auto* to = static_cast<const struct sockaddr*>(m->msg_name);
    const struct sockaddr* at = revive::plugins::dgram_to(to, m->msg_namelen, &moved);
    if (at != to) {
      routed = *m;
      routed.msg_name = &moved;
      m = &routed;
    }
  }
  if (!vpid::active() || !m || !m->msg_control || m->msg_controllen == 0 || m->msg_controllen > 4096)
    return f(fd, m, flags);
  // A copy of the control data with the pids translated (the caller's stays as it wrote it).
  alignas(struct cmsghdr) char ctl[4096];
  __builtin_memcpy(ctl, m->msg_control, m->msg_controllen);
  struct msghdr k = *m;
  k.msg_control = ctl;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&k); c; c = CMSG_NXTHDR(&k, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
      auto* u = reinterpret_cast<struct ucred*>(CMSG_DATA(c));
      u->pid = vpid::to_real(u->pid);
    }
  return f(fd, &k, flags);
}

// sendmmsg/recvmmsg (glibc's resolver sends its A and AAAA queries with one sendmmsg; QUIC stacks and
// packet relays batch both): the datagram routes of sendmsg/recvmsg, per message. Since 2026-11-29;
// before, a batch to a UDP socket's old address after a restart on other hosts went to the host it left.
// SCM_CREDENTIALS in a batch are passed as written (not translated, unlike sendmsg/recvmsg).
REVIVE_EXPORT int recvmmsg(int fd, struct mmsghdr* vec, unsigned vlen, int flags, struct timespec* timeout) {
  RecvmmsgFn f = next_or_enosys(&g_recvmmsg, "recvmmsg");
  if (!f) return -1;
  // The kernel takes at most UIO_MAXIOV (1024) messages and overwrites each msg_namelen: the buffers'
  // sizes the program gave are kept for the translation (a larger vlen is cut by the kernel likewise).
  constexpr unsigned kMax = 1024;
  socklen_t cap[kMax];
  const unsigned n = vec ? (vlen < kMax ? vlen : kMax) : 0;
  for (unsigned i = 0; i < n; ++i) cap[i] = vec[i].msg_hdr.msg_name ? vec[i].msg_hdr.msg_namelen : 0;
  int r = f(fd, vec, vlen, flags, timeout);
  for (int i = 0; i < r && unsigned(i) < n; ++i) {
    struct msghdr* m = &vec[i].msg_hdr;
    if (vpid::active() && m->msg_control) creds_back(m);
    if (m->msg_name) revive::plugins::dgram_from(static_cast<struct sockaddr*>(m->msg_name), cap[i], m->msg_namelen, flags);
  }
  return r;
}

REVIVE_EXPORT int sendmmsg(int fd, struct mmsghdr* vec, unsigned vlen, int flags) {
  SendmmsgFn f = next_or_enosys(&g_sendmmsg, "sendmmsg");
  if (!f) return -1;
  bool any = false;
  struct sockaddr_storage moved;
  for (unsigned i = 0; vec && i < vlen && !any; ++i) {
    const auto* to = static_cast<const struct sockaddr*>(vec[i].msg_hdr.msg_name);
    any = to && revive::plugins::dgram_to(to, vec[i].msg_hdr.msg_namelen, &moved) != to;
  }
  if (!any) return f(fd, vec, vlen, flags);
  // Some go to a moved socket: a copy of the batch with those addresses replaced, in chunks of 32 (stack),
  // each message's msg_len given back. A chunk sent in part ends the call, as the kernel's own partial
  // batch does; an error after some were sent reports those.
  constexpr unsigned kChunk = 32;
  struct mmsghdr copy[kChunk];
  struct sockaddr_storage to_now[kChunk];
  int sent = 0;
  for (unsigned base = 0; base < vlen; base += kChunk) {
    const unsigned k = vlen - base < kChunk ? vlen - base : kChunk;
    for (unsigned i = 0; i < k; ++i) {
      copy[i] = vec[base + i];
      const auto* to = static_cast<const struct sockaddr*>(copy[i].msg_hdr.msg_name);
      const struct sockaddr* at = revive::plugins::dgram_to(to, copy[i].msg_hdr.msg_namelen, &to_now[i]);
      if (at != to) copy[i].msg_hdr.msg_name = &to_now[i];
    }
    int r = f(fd, copy, k, flags);
    if (r < 0) return sent > 0 ? sent : r;
    for (int i = 0; i < r; ++i) vec[base + unsigned(i)].msg_len = copy[i].msg_len;
    sent += r;
    if (unsigned(r) < k) break;
  }
  return sent;
}
