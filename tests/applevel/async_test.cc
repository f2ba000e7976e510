// Asynchronous writing: copy mode (data may change as soon as write() returns), zero-copy (wait() before
// changing), update() staging, pinning, and failures reported by wait().
#include <sched.h>

#include "app_util.h"
#include "applevel/env_hook.h"
#include "core/fault_env.h"

namespace revive {
namespace {

using testing::ExpectError;
using testing::Opts;
using testing::TmpDir;

std::vector<double> Read(const TmpDir& t, uint64_t* version, int64_t* it, int64_t* step = nullptr) {
  std::vector<double> v;
  Checkpoint cp("a", Opts(t));
  cp.add("v", v);
  if (step) cp.add("step", step);
  cp.commit();
  EXPECT_TRUE(cp.restart_if_needed(it));
  *version = cp.version();
  return v;
}

TEST(Async, CopyModeSnapshotsAtWrite) {
  TmpDir t;
  Options o = Opts(t);
  o.async = true;
  std::vector<double> v(1 << 20, 1.0);
  {
    Checkpoint cp("a", o);
    cp.add("v", v);
    cp.commit();
    cp.write(1);
    std::fill(v.begin(), v.end(), 2.0);  // allowed at once in copy mode
    cp.wait();
    EXPECT_EQ(cp.version(), 1u);
    cp.write(2);
    std::fill(v.begin(), v.end(), 3.0);
    // The destructor waits and publishes version 2.
  }
  uint64_t ver = 0;
  int64_t it = 0;
  auto got = Read(t, &ver, &it);
  EXPECT_EQ(ver, 2u);
  EXPECT_EQ(it, 3);
  EXPECT_EQ(got, std::vector<double>(1 << 20, 2.0));
}

TEST(Async, UpdateStagesTheDataWritten) {
  TmpDir t;
  Options o = Opts(t);
  o.async = true;
  std::vector<double> v(1000, 1.0);
  {
    Checkpoint cp("a", o);
    cp.add("v", v);
    cp.commit();
    cp.update();  // snapshot now ...
    std::fill(v.begin(), v.end(), 9.0);
    cp.write(4);  // ... is what gets written
  }
  uint64_t ver = 0;
  int64_t it = 0;
  EXPECT_EQ(Read(t, &ver, &it), std::vector<double>(1000, 1.0));
}

TEST(Async, ZeroCopyWritesUserMemoryAfterWait) {
  TmpDir t;
  Options o = Opts(t);
  o.zero_copy = true;
  o.async_thread_cpu = 0;
  std::vector<double> v(1 << 20);
  Checkpoint cp("a", o);
  cp.add("v", v);
  cp.commit();
  for (int k = 1; k <= 5; ++k) {
    std::fill(v.begin(), v.end(), k * 1.0);
    ASSERT_TRUE(cp.update_and_write(k, 1));
    cp.wait();  // required before modifying v in zero-copy mode
  }
  EXPECT_TRUE(cp.options().async);
  uint64_t ver = 0;
  int64_t it = 0;
  EXPECT_EQ(Read(t, &ver, &it), std::vector<double>(1 << 20, 5.0));
  EXPECT_EQ(it, 6);
}

TEST(Async, BadCpuWarnsButWrites) {
  TmpDir t;
  Options o = Opts(t);
  o.async = true;
  o.async_thread_cpu = 100000;
  std::vector<double> v(10, 4.0);
  ::testing::internal::CaptureStderr();
  {
    Checkpoint cp("a", o);
    cp.add("v", v);
    cp.commit();
    cp.write(0);
    cp.wait();
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot pin"), std::string::npos) << err;
  uint64_t ver = 0;
  int64_t it = 0;
  EXPECT_EQ(Read(t, &ver, &it), v);
}

TEST(Async, FailureIsReportedByWait) {
  TmpDir t;
  FaultEnv env(Env::Default());
  applevel::SetEnvForTesting(&env);
  Options o = Opts(t);
  o.async = true;
  std::vector<double> v(100, 1.0);
  {
    Checkpoint cp("a", o);
    cp.add("v", v);
    cp.commit();
    cp.write(1);
    cp.wait();
    env.FailNth(FaultEnv::Op::kSync, 1);
    cp.write(2);
    ExpectError([&] { cp.wait(); }, {"version 2", "fsync", "injected", "version 1 is still the newest"});
    EXPECT_EQ(cp.version(), 1u);
  }
  applevel::SetEnvForTesting(nullptr);
  uint64_t ver = 0;
  int64_t it = 0;
  Read(t, &ver, &it);
  EXPECT_EQ(ver, 1u);
}

// A loop with async writes ends with the same data and versions as a synchronous one.
TEST(Async, LoopMatchesSyncRun) {
  std::vector<double> results[2];
  for (int async = 0; async < 2; ++async) {
    TmpDir t;
    Options o = Opts(t);
    o.async = async;
    o.keep = 3;
    std::vector<double> v(50000);
    int64_t step = 0;
    {
      Checkpoint cp("a", o);
      cp.add("v", v);
      cp.add("step", &step);
      cp.commit();
      for (; step < 40; ++step) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = v[i] * 0.5 + static_cast<double>(step + i);
        cp.update_and_write(step, 3);
      }
    }
    uint64_t ver = 0;
    int64_t it = 0;
    int64_t stored_step = -1;
    results[async] = Read(t, &ver, &it, &stored_step);
    EXPECT_EQ(stored_step, 39);
    EXPECT_EQ(ver, 14u);
    EXPECT_EQ(it, 40);
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace revive
