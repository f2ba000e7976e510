// `revive run`'s rules: --interval parsing, Daly's interval from the measured cost and the estimated MTBF,
// the complete generations of a directory, and which generation a relaunch uses.
#include "cli/run_policy.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>

#include "coord/manifest.h"
#include "core/resilience.h"

namespace revive::cli {
namespace {

TEST(RunPolicy, ParsesInterval) {
  IntervalPolicy p;
  ASSERT_TRUE(ParseInterval("2.5", 0, &p).ok());
  EXPECT_FALSE(p.automatic);
  EXPECT_DOUBLE_EQ(p.fixed, 2.5);
  EXPECT_DOUBLE_EQ(NextInterval(p, 9, 100, 3), 2.5);  // fixed: cost and failures do not matter
  ASSERT_TRUE(ParseInterval("0", 0, &p).ok());
  EXPECT_DOUBLE_EQ(NextInterval(p, 1, 0, 0), 0);
  for (const char* bad : {"", "-1", "soon", "1s", "nan", "inf"}) {
    Status s = ParseInterval(bad, 0, &p);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--interval"), std::string::npos) << s.message();
  }
  Status s = ParseInterval("auto", 0, &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--mtbf"), std::string::npos) << s.message();
  EXPECT_FALSE(ParseInterval("auto", -5, &p).ok());
}

TEST(RunPolicy, AutoIsDalyFromCostAndMtbf) {
  IntervalPolicy p;
  ASSERT_TRUE(ParseInterval("auto", 3600, &p).ok());
  // No failure yet: the prior. Cost 10 s, M = 1 h: Daly's value.
  EXPECT_DOUBLE_EQ(NextInterval(p, 10, 0, 0), resilience::DalyInterval(10, 3600));
  // sqrt(2*10*3600) = 268.3; Daly's correction terms keep it near Young's first-order value minus δ.
  EXPECT_NEAR(NextInterval(p, 10, 0, 0), 268.3 * (1 + std::sqrt(10.0 / 7200) / 3 + 10.0 / 7200 / 9) - 10, 0.1);
  // Before any checkpoint was measured the cost is taken as 1 s.
  EXPECT_DOUBLE_EQ(NextInterval(p, 0, 0, 0), resilience::DalyInterval(1, 3600));
  // Failures observed: 2 in 1800 s with a 3600 s prior -> (3600 + 1800) / 3 = 1800 s.
  EXPECT_DOUBLE_EQ(EstimatedMtbf(3600, 1800, 2), 1800);
  EXPECT_DOUBLE_EQ(NextInterval(p, 10, 1800, 2), resilience::DalyInterval(10, 1800));
  // Many failures: the estimate tends to elapsed/failures.
  EXPECT_NEAR(EstimatedMtbf(3600, 1e6, 1000), 1000, 5);
  // A cost above 2M: Daly's interval is M.
  EXPECT_DOUBLE_EQ(NextInterval(p, 10000, 0, 0), 3600);
}

TEST(RunPolicy, ListsCompleteGenerationsNewestFirst) {
  char tmpl[] = "/tmp/run_policy_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  for (int g : {1, 2, 3, 10}) {
    std::string d = dir + "/ckpt-" + std::to_string(g);
    mkdir(d.c_str(), 0755);
    if (g != 3) std::ofstream(d + "/MANIFEST.json") << "{}";  // 3: incomplete
  }
  mkdir((dir + "/ckpt-x1").c_str(), 0755);
  std::vector<uint64_t> gens;
  ASSERT_TRUE(coord::ListCompleteGenerations(Env::Default(), dir, &gens).ok());
  EXPECT_EQ(gens, (std::vector<uint64_t>{10, 2, 1}));
  EXPECT_FALSE(coord::ListCompleteGenerations(Env::Default(), dir + "/missing", &gens).ok());
  std::string cmd = "rm -rf " + dir;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(RunPolicy, PassesOverAGenerationThatKeepsFailing) {
  RestartChoice c(2);
  std::vector<uint64_t> gens = {7, 5, 4};
  EXPECT_EQ(c.Pick(gens), 7u);
  c.Failed(7);
  EXPECT_EQ(c.Pick(gens), 7u);  // once may be the failure, not the checkpoint
  c.Failed(7);
  EXPECT_EQ(c.Pick(gens), 5u);  // twice in a row without a newer generation: the next older one
  c.Failed(5);
  c.Failed(5);
  c.Failed(4);
  c.Failed(4);
  EXPECT_EQ(c.Pick(gens), 0u);  // none left
  EXPECT_EQ(c.FailuresFrom(5), 2u);
  EXPECT_EQ(RestartChoice(2).Pick({}), 0u);
}

}  // namespace
}  // namespace revive::cli

namespace revive::cli {
namespace {

coord::Manifest Gen(uint64_t g, double time, std::vector<uint64_t> upids) {
  coord::Manifest m;
  m.generation = g;
  m.time = time;
  for (uint64_t u : upids) {
    coord::ManifestProc p;
    p.upid = u;
    p.pid = u + 100;
    p.host = "h";
    p.prog = "prog" + std::to_string(u);
    p.image = "x.rimg";
    p.bytes = 1;
    m.procs.push_back(p);
  }
  return m;
}

TEST(RunPolicy, SuspectsAGenerationThatLostAProcessJustBeforeTheFailure) {
  std::string why;
  // 5 began the attempt; 6 is whole; 7 lost upid 3 one second before the failure at t=100; 8 is newer.
  std::vector<coord::Manifest> ms = {Gen(5, 90, {1, 2, 3}), Gen(6, 95, {1, 2, 3}), Gen(7, 99, {1, 2}), Gen(8, 99.5, {1, 2})};
  EXPECT_EQ(SuspectGenerations(ms, 100, 3, &why), (std::vector<uint64_t>{7, 8}));
  EXPECT_NE(why.find("generation 7 no longer has process upid 3 (prog3)"), std::string::npos) << why;
  // The same loss long before the failure: a process that exited as part of the job's work.
  EXPECT_TRUE(SuspectGenerations(ms, 200, 3, &why).empty());
  // New processes appearing are no loss; nothing lost at all.
  EXPECT_TRUE(SuspectGenerations({Gen(1, 99, {1}), Gen(2, 99.5, {1, 2})}, 100, 3, &why).empty());
  EXPECT_TRUE(SuspectGenerations({Gen(1, 99, {1})}, 100, 3, &why).empty());
  EXPECT_TRUE(SuspectGenerations({}, 100, 3, &why).empty());
}

}  // namespace
}  // namespace revive::cli
