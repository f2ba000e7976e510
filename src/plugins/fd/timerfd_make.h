// A timerfd made again from its saved state (fd_record.h TimerfdState): the fd plugin's restore of one
// process's timerfd (fd_special.cpp) and `revive restart`'s of one shared by several (proctree's
// tree_spawn.cpp) are one procedure. Plain system calls, no allocation: it runs in a restored process with
// user threads held.
#pragma once

#include <errno.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "plugins/fd/fd_record.h"

#ifndef TFD_IOC_SET_TICKS  // CONFIG_CHECKPOINT_RESTORE's ioctl; older headers lack the name
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

namespace revive::plugins {

enum class TimerfdMade { kOk, kMalformed, kNoClock, kNotArmed };

// The timerfd: created on s's clock with `flags` (TFD_CLOEXEC, TFD_NONBLOCK), re-armed with the remaining
// time relative (whatever the clock did meanwhile) and the interval, and given its unread expirations
// back (TFD_IOC_SET_TICKS; *ticks_lost when the kernel cannot). -1 and *why otherwise (errno set).
inline int timerfd_from_state(const TimerfdState& s, int flags, TimerfdMade* why, bool* ticks_lost) {
  *ticks_lost = false;
  if (s.value_nsec < 0 || s.value_nsec >= 1000000000 || s.interval_nsec < 0 || s.interval_nsec >= 1000000000 ||
      s.value_sec < 0 || s.interval_sec < 0) {
    *why = TimerfdMade::kMalformed;
    errno = EINVAL;
    return -1;
  }
  int fd = timerfd_create(s.clockid, flags);
  if (fd < 0) {
    *why = TimerfdMade::kNoClock;
    return -1;
  }
  struct itimerspec its = {{s.interval_sec, s.interval_nsec}, {s.value_sec, s.value_nsec}};
  if ((s.value_sec || s.value_nsec) && timerfd_settime(fd, 0, &its, nullptr) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    *why = TimerfdMade::kNotArmed;
    return -1;
  }
  if (s.ticks > 0 && ioctl(fd, TFD_IOC_SET_TICKS, &s.ticks) != 0) *ticks_lost = true;
  *why = TimerfdMade::kOk;
  return fd;
}

}  // namespace revive::plugins
