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

volatile sig_atomic_t g_engine_hits;
void engine_handler(int) { g_engine_hits = g_engine_hits + 1; }
void program_handler(int) {}

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
  EXPECT_EQ(kernel_action(SIGUSR1).handler, reinterpret_cast<void*>(program_handler));
  EXPECT_EQ(kernel_action(SIGUSR1).mask & bit(ckpt_), 0u);
  EXPECT_NE(kernel_action(SIGUSR1).mask & bit(SIGUSR2), 0u);
  EXPECT_EQ(sigaction(SIGUSR1, nullptr, &old), 0);
  EXPECT_FALSE(sigismember(&old.sa_mask, ckpt_));
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

// A wait with a full signal mask must still let the checkpoint signal in (it returns EINTR then).
TEST_F(SignalWrappers, WaitsWithAFullMaskStillTakeTheCheckpointSignal) {
  sigset_t all;
  sigfillset(&all);
  pthread_t self = pthread_self();
  int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  const char* names[] = {"ppoll", "pselect", "epoll_pwait", "epoll_pwait2"};
  for (int k = 0; k < 4; ++k) {
    g_engine_hits = 0;
    std::thread kicker([&] {
      usleep(100000);
      pthread_kill(self, ckpt_);
    });
    timespec two = {2, 0};
    int rc = -2;
    if (k == 0) rc = ppoll(nullptr, 0, &two, &all);
    if (k == 1) rc = pselect(0, nullptr, nullptr, nullptr, &two, &all);
    if (k == 2) {
      epoll_event ev;
      rc = epoll_pwait(ep, &ev, 1, 2000, &all);
    }
    if (k == 3) {
      epoll_event ev;
      rc = epoll_pwait2(ep, &ev, 1, &two, &all);
    }
    int e = errno;
    kicker.join();
    EXPECT_EQ(rc, -1) << names[k];
    EXPECT_EQ(e, EINTR) << names[k];
    EXPECT_EQ(g_engine_hits, 1) << names[k];
  }
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
