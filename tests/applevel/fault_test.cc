// Filesystem failures under the public API (FaultEnv): each injected failure gives a clear error and
// leaves the previous version intact and usable; a "crash" at every single step of writing a version
// restarts from an intact version with exactly its data.
#include <filesystem>

#include "app_util.h"
#include "applevel/env_hook.h"
#include "core/fault_env.h"

namespace revive {
namespace {

using testing::ExpectError;
using testing::Opts;
using testing::TmpDir;

constexpr size_t kN = 300000;  // 2.4 MB per array: a couple of write chunks

struct Data {
  std::vector<double> a = std::vector<double>(kN);
  std::string s;
  int64_t step = 0;
  void Fill(int v) {
    for (size_t i = 0; i < kN; ++i) a[i] = v * 1e6 + i;
    s = "version " + std::to_string(v);
    step = v;
  }
  void Register(Checkpoint& cp) {
    cp.add("a", a);
    cp.add("s", s);
    cp.add("step", &step);
  }
};

// Checkpoint "f" over Data, with version 1 (Fill(1), iteration 1) already written.
struct WithVersion1 {
  Data d;
  Checkpoint cp;
  explicit WithVersion1(const TmpDir& t) : cp("f", Opts(t)) {
    d.Register(cp);
    cp.commit();
    d.Fill(1);
    cp.write(1);
  }
};

class FaultTest : public ::testing::Test {
 protected:
  FaultEnv env{Env::Default()};
  void SetUp() override { applevel::SetEnvForTesting(&env); }
  void TearDown() override { applevel::SetEnvForTesting(nullptr); }

  // Restarts "f" with the real filesystem; checks the data is exactly that of Fill(v) written at
  // iteration v, v being the value it holds (one of `allowed`), and returns v.
  int RestartAndCheck(const TmpDir& t, std::vector<int> allowed) {
    applevel::SetEnvForTesting(nullptr);
    Data d;
    Checkpoint cp("f", Opts(t));
    d.Register(cp);
    cp.commit();
    int64_t it = 0;
    EXPECT_TRUE(cp.restart_if_needed(&it));
    int v = static_cast<int>(d.step);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), v), allowed.end()) << "read data of version " << v;
    Data want;
    want.Fill(v);
    EXPECT_EQ(d.a, want.a);
    EXPECT_EQ(d.s, want.s);
    EXPECT_EQ(it, v + 1);
    applevel::SetEnvForTesting(&env);
    return v;
  }
};

TEST_F(FaultTest, EachInjectedFailureIsReportedAndKeepsVersion1) {
  struct Case {
    FaultEnv::Op op;
    int n;
    const char* what;
  };
  std::vector<Case> cases = {{FaultEnv::Op::kWrite, 1, "write"}, {FaultEnv::Op::kWrite, 3, "write"},
                             {FaultEnv::Op::kSync, 1, "fsync"},  {FaultEnv::Op::kSync, 4, "fsync"},
                             {FaultEnv::Op::kRename, 1, "rename"}, {FaultEnv::Op::kMkdir, 1, "mkdir"},
                             {FaultEnv::Op::kOpen, 2, "open"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what + std::to_string(c.n));
    TmpDir t;
    WithVersion1 w(t);
    Data& d = w.d;
    Checkpoint& cp = w.cp;
    env.Reset();
    env.FailNth(c.op, c.n);
    d.Fill(2);
    ExpectError([&] { cp.write(2); }, {"checkpoint 'f'", "version 2", c.what, "injected"});
    env.Reset();
    EXPECT_EQ(cp.version(), 1u);
    EXPECT_EQ(RestartAndCheck(t, {1}), 1);
    // The failed attempt does not block the next one.
    d.Fill(3);
    cp.write(3);
    EXPECT_EQ(RestartAndCheck(t, {3}), 3);
  }
}

TEST_F(FaultTest, ShortWriteIsReported) {
  TmpDir t;
  WithVersion1 w(t);
  Data& d = w.d;
  Checkpoint& cp = w.cp;
  env.ShortWriteNth(2);
  d.Fill(2);
  ExpectError([&] { cp.write(2); }, {"short write", "v-2/a", "version 1 is still the newest"});
  env.Reset();
  EXPECT_EQ(RestartAndCheck(t, {1}), 1);
}

TEST_F(FaultTest, CrashAtEveryStepRestartsFromAnIntactVersion) {
  uint64_t total = 0;
  {
    TmpDir t;
    WithVersion1 w(t);
    Data& d = w.d;
    Checkpoint& cp = w.cp;
    env.Reset();
    d.Fill(2);
    cp.write(2);
    total = env.ops();
  }
  ASSERT_GT(total, 10u);
  int saw_new = 0, saw_old = 0;
  for (uint64_t n = 1; n <= total; ++n) {
    SCOPED_TRACE("crash at operation " + std::to_string(n) + " of " + std::to_string(total));
    TmpDir t;
    {
      WithVersion1 w(t);
      Data& d = w.d;
      Checkpoint& cp = w.cp;
      env.Reset();
      env.FailFrom(n);
      d.Fill(2);
      try {
        cp.write(2);
      } catch (const Error&) {
      }
      env.Reset();
    }
    int v = RestartAndCheck(t, {1, 2});
    (v == 2 ? saw_new : saw_old)++;
  }
  // Crashing before the MANIFEST rename keeps version 1; only the last steps (pruning) see version 2.
  EXPECT_GT(saw_old, 5);
  EXPECT_GT(saw_new, 0);
}

// Restart reads every byte of the version it restores once (checked as it streams into user memory),
// whether or not an older version exists to fall back to.
TEST_F(FaultTest, RestartReadsEachByteOnce) {
  TmpDir t;
  uint64_t payload = 0;
  {
    WithVersion1 w(t);
    w.d.Fill(2);
    w.cp.write(2);
    payload = kN * sizeof(double);
  }
  auto restart_reads = [&](std::vector<int> allowed) {
    env.Reset();
    const uint64_t before = env.bytes_read();
    Data d;
    Checkpoint cp("f", Opts(t));
    d.Register(cp);
    cp.commit();
    EXPECT_TRUE(cp.restart_if_needed());
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), int(d.step)), allowed.end());
    Data want;
    want.Fill(int(d.step));
    EXPECT_EQ(d.a, want.a);
    return env.bytes_read() - before;
  };
  uint64_t two_versions = restart_reads({2});
  EXPECT_GE(two_versions, payload);
  EXPECT_LT(two_versions, payload + payload / 20) << "more than one read of the data";
  std::filesystem::remove_all(t / "cp/f/v-1");
  uint64_t one_version = restart_reads({2});
  EXPECT_GE(one_version, payload);
  EXPECT_LT(one_version, payload + payload / 20) << "more than one read of the data";
}

}  // namespace
}  // namespace revive
