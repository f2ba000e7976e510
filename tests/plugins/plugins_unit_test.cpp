// In-process tests: the section codec, message formatting, and the signal wrappers hiding the
// checkpoint signal (this test binary links the wrappers, so its own libc calls go through them; the
// engine stub makes the checkpoint signal SIGRTMAX-2).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdint.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "mem_section.h"
#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"
#include "plugins/plugins.h"

// Obsolete interfaces programs still call: bsd_signal is not declared under _GNU_SOURCE, the XSI ones
// are deprecated; the wrappers must cover them all the same.
extern "C" sighandler_t bsd_signal(int, sighandler_t);
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace revive::plugins {
namespace {

using test::MemReader;
using test::MemWriter;

TEST(Msg, FormatsNumbersErrnoAndStopsAtCapacity) {
  char buf[64];
  Msg m(buf, sizeof buf);
  m.s("fd ").i(-12).s(" ").u(0).s(" ").i(INT64_MIN).s(": ").err(ENOENT);
  EXPECT_STREQ(buf, "fd -12 0 -9223372036854775808: No such file or directory");
  char small[8];
  Msg(small, sizeof small).s("0123456789").i(42);
  EXPECT_STREQ(small, "0123456");
}

TEST(SectionIo, RoundTripsAndRejectsTruncatedOversizedOrForeignData) {
  MemWriter w;
  Out out(w);
  out.tag("RVXX");
  out.u32(7);
  out.i64(-5);
  out.str("hello", 5);
  ASSERT_TRUE(out.ok());
  {
    MemReader r(w.bytes);
    In in(r);
    char s[16];
    EXPECT_TRUE(in.tag("RVXX"));
    EXPECT_EQ(in.u32(), 7u);
    EXPECT_EQ(in.i64(), -5);
    EXPECT_TRUE(in.str(s, sizeof s));
    EXPECT_STREQ(s, "hello");
    EXPECT_TRUE(in.ok());
    EXPECT_EQ(in.remaining(), 0u);
  }
  {
    MemReader r(w.bytes);
    In in(r);
    EXPECT_FALSE(in.tag("RVYY"));  // another plugin's section
  }
  {
    MemReader r(w.bytes.substr(0, w.bytes.size() - 1));
    In in(r);
    char s[16];
    in.tag("RVXX");
    in.u32();
    in.i64();
    EXPECT_FALSE(in.str(s, sizeof s));  // truncated
  }
  {
    MemReader r(w.bytes);
    In in(r);
    char s[5];  // "hello" needs 6 with its nul
    in.tag("RVXX");
    in.u32();
    in.i64();
    EXPECT_FALSE(in.str(s, sizeof s));
  }
}

struct KAct {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};
KAct kernel_action(int sig) {
  KAct a{};
  syscall(SYS_rt_sigaction, sig, nullptr, &a, 8);
  return a;
}
uint64_t kernel_mask() {
  uint64_t m = 0;
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &m, 8);
  return m;
}
uint64_t bit(int sig) { return uint64_t{1} << (sig - 1); }

}  // namespace
}  // namespace revive::plugins
namespace revive::inject {
extern __thread uint32_t t_stub_interruptions;  // engine_stub.cpp
}  // namespace revive::inject
namespace revive::plugins {
namespace {

volatile sig_atomic_t g_engine_hits;
// Like the engine's handler: counts the interruption for the sleep and wait wrappers.
void engine_handler(int) {
  g_engine_hits = g_engine_hits + 1;
  inject::t_stub_interruptions = inject::t_stub_interruptions + 1;
}
void program_handler(int) {}
volatile sig_atomic_t g_program_hits;
void counting_handler(int) { g_program_hits = g_program_hits + 1; }

class SignalWrappers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(inject::kSignalPlugin.init(), 0);
    ckpt_ = inject::checkpoint_signal();
    // What the engine does: install its handler through the real sigaction.
    struct sigaction sa = {};
    sa.sa_handler = engine_handler;
    ASSERT_EQ(inject::real_sigaction(ckpt_, &sa, nullptr), 0);
  }
  void TearDown() override {
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, 8);
    struct sigaction dfl = {};
    inject::real_sigaction(ckpt_, &dfl, nullptr);
  }
  int ckpt_ = 0;
};

TEST_F(SignalWrappers, ProgramCannotCatchOrIgnoreTheCheckpointSignalButSeesItsOwnSetting) {
  ASSERT_EQ(ckpt_, SIGRTMAX - 2);
  struct sigaction mine = {}, old = {};
  mine.sa_handler = program_handler;
  mine.sa_flags = SA_RESTART;
  EXPECT_EQ(sigaction(ckpt_, &mine, &old), 0);
  EXPECT_EQ(old.sa_handler, SIG_DFL);  // the program never sees the engine's handler
  EXPECT_EQ(kernel_action(ckpt_).handler, reinterpret_cast<void*>(engine_handler));
  EXPECT_EQ(sigaction(ckpt_, nullptr, &old), 0);
  EXPECT_EQ(old.sa_handler, program_handler);  // ... but reads back what it set
  EXPECT_EQ(signal(ckpt_, SIG_IGN), program_handler);
  EXPECT_EQ(sigset(ckpt_, SIG_DFL), SIG_IGN);
  EXPECT_EQ(kernel_action(ckpt_).handler, reinterpret_cast<void*>(engine_handler));
  g_engine_hits = 0;
  raise(ckpt_);
  EXPECT_EQ(g_engine_hits, 1);  // still delivered to the engine
  // Other signals are installed for real, but their handlers' masks cannot block the checkpoint signal.
  sigfillset(&mine.sa_mask);
  EXPECT_EQ(sigaction(SIGUSR1, &mine, nullptr), 0);
  // ... behind the counting trampoline (signal_wrappers.cpp), invisible to the program.
  EXPECT_NE(kernel_action(SIGUSR1).handler, reinterpret_cast<void*>(program_handler));
  EXPECT_NE(kernel_action(SIGUSR1).flags & SA_SIGINFO, 0u);
  EXPECT_EQ(kernel_action(SIGUSR1).mask & bit(ckpt_), 0u);
  EXPECT_NE(kernel_action(SIGUSR1).mask & bit(SIGUSR2), 0u);
  EXPECT_EQ(sigaction(SIGUSR1, nullptr, &old), 0);
  EXPECT_EQ(old.sa_handler, program_handler);
  EXPECT_EQ(old.sa_flags & SA_SIGINFO, 0);
  EXPECT_NE(old.sa_flags & SA_RESTART, 0);
  EXPECT_FALSE(sigismember(&old.sa_mask, ckpt_));
  EXPECT_EQ(signal(SIGUSR1, counting_handler), program_handler);
  EXPECT_NE(kernel_action(SIGUSR1).handler, reinterpret_cast<void*>(counting_handler));
  g_program_hits = 0;
  raise(SIGUSR1);
  EXPECT_EQ(g_program_hits, 1);  // the trampoline calls the program's handler
  EXPECT_EQ(sigaction(SIGUSR1, nullptr, &old), 0);
  EXPECT_EQ(old.sa_handler, counting_handler);
  signal(SIGUSR1, SIG_DFL);
}

TEST_F(SignalWrappers, ProgramCannotBlockTheCheckpointSignalNorSeeItInMasks) {
  sigset_t all, old;
  sigfillset(&all);
  ASSERT_EQ(sigprocmask(SIG_BLOCK, &all, nullptr), 0);
  EXPECT_EQ(kernel_mask() & bit(ckpt_), 0u);
  EXPECT_NE(kernel_mask() & bit(SIGUSR2), 0u);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &all, nullptr), 0);
  EXPECT_EQ(kernel_mask() & bit(ckpt_), 0u);
  // Even when the engine blocks it (e.g. while writing the image), reads hide it.
  uint64_t b = bit(ckpt_);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &b, nullptr, 8);
  ASSERT_EQ(sigprocmask(SIG_BLOCK, nullptr, &old), 0);
  EXPECT_FALSE(sigismember(&old, ckpt_));
  EXPECT_TRUE(sigismember(&old, SIGUSR2));
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &old), 0);
  EXPECT_FALSE(sigismember(&old, ckpt_));
  // Pending: raised while blocked, it is pending for the kernel but not for the program.
  raise(ckpt_);
  sigset_t pend;
  ASSERT_EQ(sigpending(&pend), 0);
  EXPECT_FALSE(sigismember(&pend, ckpt_));
  uint64_t kpend = 0;
  syscall(SYS_rt_sigpending, &kpend, 8);
  EXPECT_NE(kpend & bit(ckpt_), 0u);
  // Waiting for it cannot steal it from the engine.
  sigset_t want;
  sigemptyset(&want);
  sigaddset(&want, ckpt_);
  timespec zero = {0, 0};
  EXPECT_EQ(sigtimedwait(&want, nullptr, &zero), -1);
  EXPECT_EQ(errno, EAGAIN);
  syscall(SYS_rt_sigpending, &kpend, 8);
  EXPECT_NE(kpend & bit(ckpt_), 0u);
  // Unblocking delivers it to the engine's handler.
  g_engine_hits = 0;
  uint64_t none = 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, 8);
  EXPECT_EQ(g_engine_hits, 1);
}

TEST_F(SignalWrappers, ObsoleteAndStrictIsoVariantsAreCoveredToo) {
  EXPECT_EQ(sysv_signal(ckpt_, program_handler), SIG_DFL);
  EXPECT_EQ(__sysv_signal(ckpt_, SIG_IGN), program_handler);  // signal() under -std=c99
  EXPECT_EQ(bsd_signal(ckpt_, SIG_DFL), SIG_IGN);
  EXPECT_EQ(sigignore(ckpt_), 0);
  struct sigaction old = {};
  sigaction(ckpt_, nullptr, &old);
  EXPECT_EQ(old.sa_handler, SIG_IGN);
  EXPECT_EQ(sighold(ckpt_), 0);
  EXPECT_EQ(kernel_mask() & bit(ckpt_), 0u);
  EXPECT_EQ(sigrelse(ckpt_), 0);
  EXPECT_EQ(kernel_action(ckpt_).handler, reinterpret_cast<void*>(engine_handler));
  sighold(SIGUSR2);  // others for real
  EXPECT_NE(kernel_mask() & bit(SIGUSR2), 0u);
  sigrelse(SIGUSR2);
  EXPECT_EQ(kernel_mask() & bit(SIGUSR2), 0u);
  sigaction(ckpt_, &old, nullptr);
}

long long mono_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

// Every sleep and wait the wrappers resume, each waiting `ms` ms with nothing ready; -1/errno on failure.
constexpr int kWaits = 15;
const char* const kWaitNames[kWaits] = {"nanosleep", "clock_nanosleep", "clock_nanosleep_abs", "usleep", "sleep",
                                        "poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait",
                                        "epoll_pwait2", "sigsuspend", "sigtimedwait", "sigwaitinfo"};
int wait_in(int k, int ms, int ep, const sigset_t* mask) {
  timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  timeval tv = {ms / 1000, (ms % 1000) * 1000};
  epoll_event ev;
  sigset_t usr2;  // waited for, never sent
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  switch (k) {
    case 0: return nanosleep(&ts, nullptr);
    case 1: {
      int e = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
      errno = e;
      return e ? -1 : 0;
    }
    case 2: {
      timespec end;
      clock_gettime(CLOCK_MONOTONIC, &end);
      end.tv_sec += ts.tv_sec + (end.tv_nsec + ts.tv_nsec) / 1000000000;
      end.tv_nsec = (end.tv_nsec + ts.tv_nsec) % 1000000000;
      int e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, nullptr);
      errno = e;
      return e ? -1 : 0;
    }
    case 3: return usleep(useconds_t(ms) * 1000);
    case 4: {
      unsigned left = sleep(unsigned((ms + 999) / 1000));
      if (left) errno = EINTR;
      return left ? -1 : 0;
    }
    case 5: return poll(nullptr, 0, ms);
    case 6: return ppoll(nullptr, 0, &ts, mask);
    case 7: return select(0, nullptr, nullptr, nullptr, &tv);
    case 8: return pselect(0, nullptr, nullptr, nullptr, &ts, mask);
    case 9: return epoll_wait(ep, &ev, 1, ms);
    case 10: return epoll_pwait(ep, &ev, 1, ms, mask);
    case 11: return epoll_pwait2(ep, &ev, 1, &ts, mask);
    case 12: {  // ends only by a handler of the program: when none comes, by the kicker's SIGUSR1 below
      sigset_t none;
      sigemptyset(&none);
      return sigsuspend(&none);
    }
    case 13: {
      pthread_sigmask(SIG_BLOCK, &usr2, nullptr);
      int rc = sigtimedwait(&usr2, nullptr, &ts);
      pthread_sigmask(SIG_UNBLOCK, &usr2, nullptr);
      if (rc < 0 && errno == EAGAIN) return 0;  // timed out: what an undisturbed wait does
      return rc;
    }
    case 14: return 0;  // sigwaitinfo: covered by sigtimedwait's path (no timeout to bound the test)
  }
  return -2;
}

// A checkpoint signal (even two) during a sleep or wait, even one with a full mask: the call is resumed
// and lasts its whole time, as without revive. A signal of the program's own still ends it with EINTR,
// also when the checkpoint signal came too.
TEST_F(SignalWrappers, SleepsAndWaitsResumeAfterTheCheckpointSignalOnly) {
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGUSR1);
  pthread_t self = pthread_self();
  int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  struct sigaction sa = {};
  sa.sa_handler = counting_handler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  const int ms = 400;
  for (int k = 0; k < kWaits; ++k) {
    if (k == 12 || k == 14) continue;  // sigsuspend never times out: below
    g_engine_hits = 0;
    std::thread kicker([&] {
      usleep(ms * 1000 / 4);
      pthread_kill(self, ckpt_);
      usleep(ms * 1000 / 4);
      pthread_kill(self, ckpt_);
    });
    long long t0 = mono_us();
    errno = 0;
    int rc = wait_in(k, ms, ep, &all);
    int e = errno;
    long long took = mono_us() - t0;
    kicker.join();
    EXPECT_EQ(rc, 0) << kWaitNames[k] << ": " << strerror(e);
    EXPECT_GE(took, ms * 1000LL - 1000) << kWaitNames[k];
    EXPECT_EQ(g_engine_hits, 2) << kWaitNames[k];
  }
  for (int both = 0; both < 2; ++both) {
    for (int k = 0; k < kWaits; ++k) {
      if (k == 14) continue;
      g_program_hits = 0;
      std::thread kicker([&] {
        usleep(50000);
        if (both) pthread_kill(self, ckpt_);
        pthread_kill(self, SIGUSR1);
      });
      long long t0 = mono_us();
      errno = 0;
      int rc = wait_in(k, 5000, ep, &all);
      int e = errno;
      long long took = mono_us() - t0;
      kicker.join();
      EXPECT_EQ(rc, -1) << kWaitNames[k] << " both=" << both;
      EXPECT_EQ(e, EINTR) << kWaitNames[k] << " both=" << both;
      EXPECT_LT(took, 4000000) << kWaitNames[k] << " both=" << both;
      EXPECT_EQ(g_program_hits, 1) << kWaitNames[k] << " both=" << both;
    }
  }
  signal(SIGUSR1, SIG_DFL);
  close(ep);
}

TEST_F(SignalWrappers, SignalfdNeverConsumesTheCheckpointSignal) {
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, ckpt_);
  sigaddset(&m, SIGUSR2);
  int fd = signalfd(-1, &m, SFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line, mask;
  while (std::getline(info, line))
    if (line.rfind("sigmask:", 0) == 0) mask = line.substr(8);
  close(fd);
  uint64_t bits = std::stoull(mask, nullptr, 16);
  EXPECT_EQ(bits & bit(ckpt_), 0u) << mask;
  EXPECT_NE(bits & bit(SIGUSR2), 0u) << mask;
}

}  // namespace
}  // namespace revive::plugins
