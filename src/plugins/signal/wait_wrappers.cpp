// Waits that install a signal mask for their duration (ppoll, pselect, epoll_pwait, epoll_pwait2): a
// program passing a full mask would otherwise hold off checkpoints for as long as it waits. The
// checkpoint signal is removed from the mask; a checkpoint during the wait makes it return EINTR, as any
// caught signal does.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "plugins/common/next_symbol.h"
#include "plugins/signal/ckpt_mask.h"
#include "plugins/signal/signal_wrappers.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

using PpollFn = int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
using PselectFn = int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*, const sigset_t*);
using EpollPwaitFn = int (*)(int, struct epoll_event*, int, int, const sigset_t*);
using EpollPwait2Fn = int (*)(int, struct epoll_event*, int, const struct timespec*, const sigset_t*);

PpollFn g_ppoll;
PselectFn g_pselect;
EpollPwaitFn g_epoll_pwait;
EpollPwait2Fn g_epoll_pwait2;

}  // namespace

void wait_wrappers_init() {
  next_symbol(&g_ppoll, "ppoll");
  next_symbol(&g_pselect, "pselect");
  next_symbol(&g_epoll_pwait, "epoll_pwait");
  next_symbol(&g_epoll_pwait2, "epoll_pwait2");
}

}  // namespace revive::plugins

using revive::plugins::next_or_enosys;
using revive::plugins::strip;

REVIVE_EXPORT int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* timeout, const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_ppoll, "ppoll");
  return f ? f(fds, n, timeout, strip(mask, &copy)) : -1;
}

REVIVE_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* timeout,
                          const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_pselect, "pselect");
  return f ? f(n, r, w, e, timeout, strip(mask, &copy)) : -1;
}

REVIVE_EXPORT int epoll_pwait(int epfd, struct epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_epoll_pwait, "epoll_pwait");
  return f ? f(epfd, ev, max, timeout, strip(mask, &copy)) : -1;
}

REVIVE_EXPORT int epoll_pwait2(int epfd, struct epoll_event* ev, int max, const struct timespec* timeout,
                               const sigset_t* mask) {
  sigset_t copy;
  auto f = next_or_enosys(&revive::plugins::g_epoll_pwait2, "epoll_pwait2");
  return f ? f(epfd, ev, max, timeout, strip(mask, &copy)) : -1;
}
