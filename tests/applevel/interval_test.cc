// Time-based checkpoint interval (REVIVE_CP_INTERVAL=SECONDS|auto, REVIVE_MTBF) and heartbeat files
// (REVIVE_HEARTBEAT_DIR): the rule on given times, then real runs whose iterations are slowed with sleeps,
// bad values, and the heartbeat file's content, mtime and failure.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "app_util.h"
#include "applevel/interval.h"

namespace revive {
namespace {

using applevel::IntervalSchedule;
using testing::ExpectError;
using testing::Opts;
using testing::TmpDir;

constexpr uint64_t kMs = 1000000;

// Daly (2006) as the ftRMA paper quotes it, written out again here so the test does not check the library
// against itself.
double Daly(double c, double m) {
  if (c >= 2 * m) return m;
  return std::sqrt(2 * c * m) * (1 + std::sqrt(c / (2 * m)) / 3 + c / (2 * m) / 9) - c;
}

void SleepMs(double ms) { std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000))); }

// ---- the rule, on given times ---------------------------------------------------------------------------

TEST(IntervalSchedule, BootstrapsWithEveryThenFollowsTheMeasuredRate) {
  IntervalSchedule s(0.255, false, 0);
  ASSERT_TRUE(s.enabled());
  s.Start(0, 0);
  EXPECT_TRUE(s.Due(0, 10));  // the first write: iteration % every, as without an interval
  s.Blocked(3 * kMs);
  IntervalSchedule::Sample m = s.Measure(0, 3 * kMs);
  EXPECT_EQ(m.ns_per_iteration, 0u);  // no iteration since the first call: nothing measured
  s.Plan(0, m, 3 * kMs);
  EXPECT_EQ(s.state().next_iteration, -1);
  EXPECT_FALSE(s.Due(5, 10));
  EXPECT_TRUE(s.Due(10, 10));  // still `every`
  // 10 iterations of 10 ms, then a write of 4 ms: 10 ms per iteration, k = round(0.255 / 0.01) = 26.
  s.Blocked(4 * kMs);
  m = s.Measure(10, 3 * kMs + 100 * kMs + 4 * kMs);
  EXPECT_EQ(m.ns_per_iteration, 10 * kMs);
  EXPECT_EQ(m.cost_ns, 4 * kMs);
  // Another rank was slower (12 ms per iteration): the agreed maximum decides, k = round(21.25) = 21.
  s.Plan(10, {12 * kMs, 5 * kMs}, 107 * kMs);
  EXPECT_EQ(s.state().next_iteration, 31);
  EXPECT_DOUBLE_EQ(s.state().seconds_per_iteration, 0.012);
  EXPECT_DOUBLE_EQ(s.state().cost, 0.005);
  EXPECT_FALSE(s.Due(30, 10));  // a multiple of `every` no longer writes
  EXPECT_TRUE(s.Due(31, 10));
  EXPECT_FALSE(s.Due(31, 0));  // every <= 0 never writes, interval or not
  // Iterations slower than the interval: one write per iteration (k >= 1).
  s.Plan(31, {1000 * kMs, kMs}, 0);
  EXPECT_EQ(s.state().next_iteration, 32);
  // A write that measured nothing (write() at the same iteration) keeps the last gap.
  s.Plan(32, {0, kMs}, 0);
  EXPECT_EQ(s.state().next_iteration, 33);
}

TEST(IntervalSchedule, AutoIsDalysIntervalForTheAgreedCost) {
  IntervalSchedule s(0, true, 600);
  s.Start(0, 0);
  s.Plan(50, {2 * kMs, 1500 * kMs}, 0);  // C = 1.5 s, M = 600 s
  EXPECT_NEAR(s.state().interval, Daly(1.5, 600), 1e-9);
  EXPECT_EQ(s.state().next_iteration, 50 + std::llround(Daly(1.5, 600) / 0.002));
  s.Plan(60, {2 * kMs, 2000 * 1000 * kMs}, 0);  // C >= 2M: the interval is M
  EXPECT_DOUBLE_EQ(s.state().interval, 600);
}

// ---- real runs ------------------------------------------------------------------------------------------

// Runs `n` iterations of `ms` milliseconds each through update_and_write(it, every); after every write,
// checks that the write happened exactly at the planned iteration, that the next one was planned by the
// rule from the figures the library reports, and that the rate it measured is the time spent outside
// checkpoint calls (as the test sees it, loaded machine or not), not the checkpoint's. Returns the
// iterations written.
std::vector<int64_t> RunLoop(Checkpoint& cp, int64_t n, int64_t every, double ms, std::vector<double>* call_s = nullptr) {
  using Clock = std::chrono::steady_clock;
  std::vector<int64_t> wrote;
  int64_t planned = -1;
  double outside = 0;  // seconds outside checkpoint calls since the last write
  Clock::time_point left = Clock::now();
  for (int64_t it = 0; it < n; ++it) {
    SleepMs(ms);
    const Clock::time_point t0 = Clock::now();
    outside += std::chrono::duration<double>(t0 - left).count();
    const bool w = cp.update_and_write(it, every);
    left = Clock::now();
    EXPECT_EQ(w, planned < 0 ? it % every == 0 : it == planned) << "iteration " << it;
    if (!w) continue;
    const Checkpoint::IntervalState st = cp.interval_state();
    if (!wrote.empty() && st.next_iteration >= 0) {
      const double expect = outside / static_cast<double>(it - wrote.back());
      EXPECT_NEAR(st.seconds_per_iteration, expect, 0.1 * expect + 50e-6) << "iteration " << it;
    }
    outside = 0;
    wrote.push_back(it);
    if (call_s) call_s->push_back(std::chrono::duration<double>(left - t0).count());
    planned = st.next_iteration;
    if (planned < 0) continue;  // nothing measured yet (a write at the first call)
    const int64_t k = std::max<int64_t>(1, std::llround(st.interval / st.seconds_per_iteration));
    EXPECT_EQ(planned, it + k) << "interval " << st.interval << " s, " << st.seconds_per_iteration << " s/iteration";
    EXPECT_GE(st.seconds_per_iteration, ms * 1e-3 * 0.9);  // a sleep lasts at least that long
  }
  return wrote;
}

TEST(Interval, FixedIntervalChoosesTheWriteIterations) {
  TmpDir t;
  Options o = Opts(t);
  o.interval = 0.04;
  std::vector<double> v(1000, 1.0);
  Checkpoint cp("a", o);
  cp.add("v", v);
  cp.commit();
  const std::vector<int64_t> wrote = RunLoop(cp, 200, 7, 1.0);
  // 0 (bootstrap, nothing measured), 7 (bootstrap, measured), then by time: about one write per 40 ms.
  ASSERT_GE(wrote.size(), 3u);
  EXPECT_EQ(wrote[0], 0);
  EXPECT_EQ(wrote[1], 7);
  EXPECT_EQ(cp.version(), wrote.size());
  for (size_t i = 2; i < wrote.size(); ++i)
    EXPECT_LE(wrote[i] - wrote[i - 1], 44) << "gaps of 40 ms at >= 0.9 ms per iteration";
  int64_t it = 0;
  Checkpoint r("a", o);
  r.add("v", v);
  r.commit();
  ASSERT_TRUE(r.restart_if_needed(&it));
  EXPECT_EQ(it, wrote.back() + 1);
}

TEST(Interval, AutoUsesDalysIntervalForTheMeasuredCost) {
  TmpDir t;
  Options o = Opts(t);
  o.interval_auto = true;
  o.mtbf = 0.5;
  std::vector<double> v(1 << 19, 2.0);  // 4 MiB, fsynced: a cost of some milliseconds
  Checkpoint cp("a", o);
  cp.add("v", v);
  cp.commit();
  std::vector<double> call_s;
  const std::vector<int64_t> wrote = RunLoop(cp, 260, 5, 1.0, &call_s);
  ASSERT_GE(wrote.size(), 2u);  // 0, then 5: the first measured write (a slow disk may allow no third)
  const Checkpoint::IntervalState st = cp.interval_state();
  // C is the time the program was blocked in the write call, as the test measured it around the call.
  const double c = call_s.back();
  EXPECT_NEAR(st.cost, c, 0.2 * c + 0.001) << "library's C vs the call's duration";
  EXPECT_NEAR(st.interval, Daly(st.cost, 0.5), 1e-9);
  EXPECT_NEAR(st.interval, Daly(c, 0.5), 0.15 * Daly(c, 0.5));
}

TEST(Interval, AsyncCostIncludesTheWaitForTheWrite) {
  TmpDir t;
  Options o = Opts(t);
  o.interval = 10;
  o.zero_copy = true;
  std::vector<double> v(1 << 19, 3.0);  // 4 MiB, fsynced on the writer thread
  Checkpoint cp("a", o);
  cp.add("v", v);
  cp.commit();
  ASSERT_TRUE(cp.update_and_write(0, 2));  // bootstrap, nothing measured
  SleepMs(1);
  EXPECT_FALSE(cp.update_and_write(1, 2));
  // Zero-copy: the program waits for the write before it changes the data; that wait is checkpoint cost.
  auto t0 = std::chrono::steady_clock::now();
  cp.wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(cp.update_and_write(2, 2));
  const double blocked = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Checkpoint::IntervalState st = cp.interval_state();
  EXPECT_GE(st.cost, waited + blocked - 0.003) << "wait " << waited << " s + write " << blocked << " s";
  EXPECT_LE(st.cost, waited + blocked + 0.003);
  EXPECT_GT(st.next_iteration, 2);
}

// ---- bad values ---------------------------------------------------------------------------------------

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvVar() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Interval, BadValuesAreErrorsNamingTheVariable) {
  for (const char* bad : {"abc", "-3", "0x", "nan", "inf", "1e99"}) {
    EnvVar e("REVIVE_CP_INTERVAL", bad);
    ExpectError([] { Options::from_env(); }, {"REVIVE_CP_INTERVAL", std::string("\"") + bad + "\"", "or auto"});
  }
  {
    EnvVar e("REVIVE_MTBF", "soon");
    ExpectError([] { Options::from_env(); }, {"REVIVE_MTBF=\"soon\"", "expected a number > 0"});
  }
  {
    EnvVar e("REVIVE_MTBF", "0");
    ExpectError([] { Options::from_env(); }, {"REVIVE_MTBF=\"0\""});
  }
  TmpDir t;
  {
    EnvVar e("REVIVE_CP_INTERVAL", "AUTO");
    EnvVar p("REVIVE_CP_PATH", (t / "cp").c_str());
    Options o = Options::from_env();
    EXPECT_TRUE(o.interval_auto);
    ExpectError([] { Checkpoint cp("x"); }, {"checkpoint 'x'", "REVIVE_CP_INTERVAL=auto", "REVIVE_MTBF", "not set"});
    EnvVar m("REVIVE_MTBF", "3600");
    Checkpoint cp("x");  // now complete
    EXPECT_EQ(cp.options().mtbf, 3600);
  }
  {
    EnvVar e("REVIVE_CP_INTERVAL", "2.5");
    EXPECT_EQ(Options::from_env().interval, 2.5);
  }
  Options o = Opts(t);
  o.interval = -1;
  ExpectError([&] { Checkpoint cp("y", o); }, {"checkpoint 'y'", "REVIVE_CP_INTERVAL", ">= 0"});
  o.interval = 0;
  o.interval_auto = true;
  o.mtbf = -5;
  ExpectError([&] { Checkpoint cp("y", o); }, {"REVIVE_MTBF", "got -5"});
}

// ---- heartbeat ----------------------------------------------------------------------------------------

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Heartbeat, FileNamesTheProcessAndItsMtimeAdvances) {
  TmpDir t;
  Options o = Opts(t);
  o.heartbeat_dir = t / "hb";
  std::vector<double> v(10, 1.0);
  Checkpoint cp("a", o);
  cp.add("v", v);
  cp.commit();
  const std::string f = t / "hb/rank.0";
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(Slurp(f), "rank 0\npid " + std::to_string(getpid()) + "\nhost " + host +
                          "\ncheckpoint a\nversion 0\niteration 0\n");
  // Back-date the file, then iterate for a bit more than a second without writing: a beat sets it to now.
  const timespec old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, f.c_str(), old, 0), 0);
  for (int it = 1; it < 120; ++it) {
    SleepMs(10);
    EXPECT_FALSE(cp.update_and_write(it, 0));
  }
  struct stat st {};
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, time(nullptr) - 5);
  cp.write(7);
  EXPECT_NE(Slurp(f).find("\nversion 1\niteration 7\n"), std::string::npos) << Slurp(f);
}

TEST(Heartbeat, UncreatableFileIsOneWarningNotAFailure) {
  TmpDir t;
  std::ofstream(t / "file") << "x";
  Options o = Opts(t);
  o.heartbeat_dir = t / "file/hb";  // under a regular file: ENOTDIR, also for root
  std::vector<double> v(10, 1.0);
  ::testing::internal::CaptureStderr();
  {
    Checkpoint cp("a", o);
    cp.add("v", v);
    cp.commit();
    for (int it = 0; it < 5; ++it) cp.update_and_write(it, 2);
    EXPECT_EQ(cp.version(), 3u);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  const size_t at = err.find("warning: no heartbeat (REVIVE_HEARTBEAT_DIR): cannot create " + t / "file/hb");
  EXPECT_NE(at, std::string::npos) << err;
  EXPECT_EQ(err.find("warning", at + 1), std::string::npos) << "one warning only: " << err;
}

}  // namespace
}  // namespace revive
