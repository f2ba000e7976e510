// librevive_hooks against a fake engine (this executable exports revive_hooks_engine_v1, so the library
// attaches to it as it would to librevive_inject.so): the engine's side of the protocol played from a
// thread, checking what docs/hooks.md promises — callbacks in order on the hooks thread, the gate keeping
// every thread out of its sections while a "checkpoint" is taken, the last end waking the engine, the
// C++ wrapper, argument errors, fork.
#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "hooks/hooks_abi.h"
#include "revive/hooks.hpp"

namespace {

revive_hooks_shared* g_sh;
std::atomic<uint32_t> g_notified{0};

int attach(revive_hooks_shared* sh) {
  g_sh = sh;
  return 0;
}
void notify() {
  g_notified.fetch_add(1);
  syscall(SYS_futex, &g_notified, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
}
constexpr revive_hooks_engine kEngine = {REVIVE_HOOKS_ABI, attach, notify};

uint32_t ld(volatile uint32_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
void st(volatile uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

// What the engine does to ask the hooks thread for callbacks of one kind (hooks.cpp wake_thread).
uint32_t ask(volatile uint32_t* req) {
  uint32_t v = __atomic_add_fetch(req, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&g_sh->event, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &g_sh->event, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
  return v;
}

template <class F>
bool eventually(F f, int ms = 5000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return f();
}

std::vector<std::string> g_log;
pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
void note(void* arg) {
  pthread_mutex_lock(&g_log_mu);
  g_log.push_back(static_cast<const char*>(arg));
  pthread_mutex_unlock(&g_log_mu);
}
size_t log_size() {
  pthread_mutex_lock(&g_log_mu);
  size_t n = g_log.size();
  pthread_mutex_unlock(&g_log_mu);
  return n;
}
std::vector<std::string> log_copy() {
  pthread_mutex_lock(&g_log_mu);
  auto v = g_log;
  g_log.clear();
  pthread_mutex_unlock(&g_log_mu);
  return v;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const revive_hooks_engine* revive_hooks_engine_v1() { return &kEngine; }

TEST(Hooks, AttachesToTheEngine) {
  ASSERT_EQ(revive_hooks_active(), 1);
  ASSERT_NE(g_sh, nullptr);
  EXPECT_EQ(g_sh->abi, uint32_t(REVIVE_HOOKS_ABI));
  EXPECT_EQ(ld(&g_sh->thread), 0u) << "no thread before the first registration";
}

TEST(Hooks, ArgumentErrors) {
  EXPECT_EQ(revive_register_callback(3, note, nullptr), -EINVAL);
  EXPECT_EQ(revive_register_callback(-1, note, nullptr), -EINVAL);
  EXPECT_EQ(revive_register_callback(REVIVE_HOOK_CHECKPOINT, nullptr, nullptr), -EINVAL);
  EXPECT_EQ(revive_unregister_callback(123456), -ENOENT);
  EXPECT_EQ(revive_critical_end(), -EINVAL);
  EXPECT_EQ(revive_set_critical_timeout(0), -EINVAL);
  EXPECT_EQ(revive_set_critical_timeout(-2), -EINVAL);
  EXPECT_EQ(revive_set_critical_timeout(NAN), -EINVAL);
  EXPECT_EQ(revive_set_critical_timeout(2.5), 0);
  EXPECT_DOUBLE_EQ(revive_critical_timeout(), 2.5);
  EXPECT_EQ(g_sh->timeout_ms, 2500u);
  EXPECT_THROW(revive::hooks::set_critical_timeout(std::chrono::seconds(0)), std::system_error);
  revive::hooks::set_critical_timeout(std::chrono::milliseconds(1500));
  EXPECT_EQ(g_sh->timeout_ms, 1500u);
}

TEST(Hooks, CallbacksRunOnTheHooksThreadInOrder) {
  static char a[] = "ckpt-a", b[] = "ckpt-b", c[] = "cont", r[] = "restart";
  int ia = revive_register_callback(REVIVE_HOOK_CHECKPOINT, note, a);
  int ib = revive_register_callback(REVIVE_HOOK_CHECKPOINT, note, b);
  int ic = revive_register_callback(REVIVE_HOOK_CONTINUE, note, c);
  int ir = revive_register_callback(REVIVE_HOOK_RESTART, note, r);
  ASSERT_GT(ia, 0);
  ASSERT_GT(ir, ic);
  EXPECT_EQ(ld(&g_sh->thread), 1u) << "the first registration starts the hooks thread and waits for it";
  uint32_t n0 = g_notified.load();
  uint32_t want = ask(&g_sh->ckpt_req);
  ASSERT_TRUE(eventually([&] { return ld(&g_sh->ckpt_done) == want; }));
  EXPECT_GT(g_notified.load(), n0) << "the engine is told the checkpoint callbacks are done";
  EXPECT_EQ(log_copy(), (std::vector<std::string>{"ckpt-a", "ckpt-b"}));
  ask(&g_sh->cont_req);
  ASSERT_TRUE(eventually([&] { return log_size() == 1; }));
  ask(&g_sh->restart_req);
  ASSERT_TRUE(eventually([&] { return log_size() == 2; }));
  EXPECT_EQ(log_copy(), (std::vector<std::string>{"cont", "restart"}));
  for (int id : {ia, ib, ic, ir}) EXPECT_EQ(revive_unregister_callback(id), 0);
  ask(&g_sh->cont_req);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(log_copy().empty()) << "unregistered callbacks do not run";
}

TEST(Hooks, UnregisterWaitsForARunningCallback) {
  static std::atomic<int> phase{0};
  auto slow = [](void*) {
    phase = 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    phase = 2;
  };
  int id = revive_register_callback(REVIVE_HOOK_CONTINUE, slow, nullptr);
  ASSERT_GT(id, 0);
  ask(&g_sh->cont_req);
  ASSERT_TRUE(eventually([] { return phase.load() == 1; }));
  EXPECT_EQ(revive_unregister_callback(id), 0);
  EXPECT_EQ(phase.load(), 2) << "unregister returned while the callback still ran";
}

TEST(Hooks, CxxRegistrationsAndExceptions) {
  namespace hk = revive::hooks;
  std::atomic<int> ran{0};
  {
    auto r1 = hk::on_continue([&] { ran += 1; });
    auto r2 = hk::on_continue([] { throw std::runtime_error("boom"); });  // reported, not fatal
    hk::Registration moved = std::move(r1);
    EXPECT_EQ(r1.id(), 0);
    EXPECT_GT(moved.id(), 0);
    ask(&g_sh->cont_req);
    ASSERT_TRUE(eventually([&] { return ran.load() == 1; }));
  }
  ask(&g_sh->cont_req);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), 1) << "a destroyed Registration's callback ran";
}

TEST(Hooks, NestingIsPerThread) {
  EXPECT_EQ(revive_critical_depth(), 0);
  {
    revive::hooks::CriticalSection a;
    revive::hooks::CriticalSection b;
    EXPECT_EQ(revive_critical_depth(), 2);
    EXPECT_EQ(ld(&g_sh->inside), 1u) << "only the outermost section counts";
    std::thread([] {
      EXPECT_EQ(revive_critical_depth(), 0);
      revive_critical_begin();
      EXPECT_EQ(ld(&g_sh->inside), 2u);
      EXPECT_EQ(revive_critical_end(), 0);
    }).join();
  }
  EXPECT_EQ(ld(&g_sh->inside), 0u);
}

// Threads hammer nested sections while the fake engine takes "checkpoints": close the gate, wait for the
// last end (it must notify), check that no thread is inside for a while, open the gate.
TEST(Hooks, GateKeepsEveryThreadOutDuringACheckpoint) {
  std::atomic<int> really_inside{0};
  std::atomic<bool> stop{false};
  std::atomic<long> sections{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      while (!stop.load()) {
        revive_critical_begin();
        really_inside++;
        revive_critical_begin();
        for (int i = 0; i < 50; ++i) asm volatile("" ::: "memory");
        revive_critical_end();
        really_inside--;
        revive_critical_end();
        sections++;
      }
    });
  }
  int waited = 0;
  for (int ck = 0; ck < 200; ++ck) {
    st(&g_sh->gate, 1);
    st(&g_sh->want_wake, 1);
    uint32_t n = g_notified.load();
    if (ld(&g_sh->inside) != 0) {
      ++waited;
      ASSERT_TRUE(eventually([&] { return ld(&g_sh->inside) == 0; }, 5000)) << "sections never ended";
      ASSERT_TRUE(eventually([&] { return g_notified.load() != n; }, 5000)) << "the last end did not notify";
    }
    st(&g_sh->want_wake, 0);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(really_inside.load(), 0) << "a thread entered a section past the gate";
    st(&g_sh->gate, 0);
    syscall(SYS_futex, &g_sh->gate, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;
  for (auto& t : ts) t.join();
  EXPECT_EQ(ld(&g_sh->inside), 0u);
  EXPECT_GT(sections.load(), 1000);
  EXPECT_GT(waited, 0) << "never caught a section open: the test proved nothing";
}

TEST(Hooks, ForkChildKeepsOnlyItsOwnSections) {
  int id = revive_register_callback(REVIVE_HOOK_CONTINUE, note, nullptr);
  ASSERT_GT(id, 0);
  std::atomic<bool> stop{false};
  std::thread other([&] {  // another thread inside a section at the fork: not in the child
    revive_critical_begin();
    while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    revive_critical_end();
  });
  ASSERT_TRUE(eventually([] { return ld(&g_sh->inside) == 1; }));
  revive_critical_begin();
  pid_t pid = fork();
  if (pid == 0) {
    bool ok = ld(&g_sh->inside) == 1 && revive_critical_depth() == 1 && ld(&g_sh->thread) == 0 &&
              ld(&g_sh->gate) == 0 && revive_critical_end() == 0 && ld(&g_sh->inside) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(revive_critical_end(), 0);
  stop = true;
  other.join();
  EXPECT_EQ(revive_unregister_callback(id), 0);
}
