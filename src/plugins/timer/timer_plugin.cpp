// timer plugin: the three interval timers (ITIMER_REAL, which alarm() also uses, ITIMER_VIRTUAL,
// ITIMER_PROF) and POSIX timers (posix_timers.cpp): remaining time and interval at the checkpoint,
// re-armed on restore. The time the
// checkpoint itself takes counts against ITIMER_REAL in the original process, as wall-clock time does.
#include <errno.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"
#include "plugins/plugins.h"
#include "plugins/timer/posix_timers.h"

namespace revive::plugins {
namespace {

constexpr char kTag[] = "RVTM";
constexpr uint32_t kNumItimers = 3;
const char* const kItimerNames[kNumItimers] = {"ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"};

// Raw syscalls: glibc's wrappers are thin, but these are the kernel's own struct layouts for sure.
int get_itimer(int which, struct itimerval* v) { return static_cast<int>(syscall(SYS_getitimer, which, v)); }
int set_itimer(int which, const struct itimerval* v) {
  return static_cast<int>(syscall(SYS_setitimer, which, v, nullptr));
}

bool valid(const struct timeval& t) { return t.tv_sec >= 0 && t.tv_usec >= 0 && t.tv_usec < 1000000; }

int init() { return posix_timers_init(); }

int save(inject::SectionWriter& w) {
  Out out(w);
  out.tag(kTag);
  out.u32(kNumItimers);
  for (uint32_t k = 0; k < kNumItimers; ++k) {
    struct itimerval v{};
    if (get_itimer(static_cast<int>(k), &v) != 0) return -errno;
    out.i64(v.it_value.tv_sec);
    out.i64(v.it_value.tv_usec);
    out.i64(v.it_interval.tv_sec);
    out.i64(v.it_interval.tv_usec);
  }
  return posix_timers_save(out) ? 0 : -ENOMEM;
}

void resume(bool) {}

int restore(inject::SectionReader& r, char* msg, size_t cap) {
  char line[160];
  In in(r);
  if (!in.tag(kTag)) return fail(msg, cap, Msg(line, sizeof line).s("timer section: bad tag (not a timer section)"), EINVAL);
  uint32_t n = in.u32();
  if (!in.ok() || n != kNumItimers) return fail(msg, cap, Msg(line, sizeof line).s("timer section: bad itimer count ").u(n), EINVAL);
  struct itimerval v[kNumItimers];
  for (uint32_t k = 0; k < kNumItimers; ++k) {
    v[k].it_value.tv_sec = in.i64();
    v[k].it_value.tv_usec = in.i64();
    v[k].it_interval.tv_sec = in.i64();
    v[k].it_interval.tv_usec = in.i64();
    if (in.ok() && (!valid(v[k].it_value) || !valid(v[k].it_interval)))
      return fail(msg, cap, Msg(line, sizeof line).s("timer section: ").s(kItimerNames[k]).s(" has an invalid time"), EINVAL);
  }
  if (!in.ok()) return fail(msg, cap, Msg(line, sizeof line).s("timer section: truncated"), EINVAL);
  if (int rc = posix_timers_restore(in, msg, cap); rc != 0) return rc;
  if (in.remaining() != 0) return fail(msg, cap, Msg(line, sizeof line).s("timer section: trailing bytes"), EINVAL);
  for (uint32_t k = 0; k < kNumItimers; ++k) {
    if (set_itimer(static_cast<int>(k), &v[k]) != 0) {
      int e = errno;
      return fail(msg, cap, Msg(line, sizeof line).s(kItimerNames[k]).s(": cannot re-arm: ").err(e), e);
    }
  }
  return 0;
}

}  // namespace
}  // namespace revive::plugins

namespace revive::inject {
const Plugin kTimerPlugin = {"timer", 1, plugins::init, plugins::save, plugins::resume, plugins::restore, nullptr, nullptr, nullptr, nullptr};
}
