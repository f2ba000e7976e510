// Multi-level storage with one rank (no MPI): node-local versions, the background flush to the global
// level (a thread: this test also runs under TSan), restart from each level, the policy's parsing, and
// the REVIVE_CONFIG file. Partner copies and parity need several ranks: tests/multilevel.
#include <cstdlib>
#include <fstream>

#include "app_util.h"

namespace revive {
namespace {

using testing::ExpectError;
using testing::TmpDir;

Options MlOpts(const TmpDir& t, const std::string& levels) {
  Options o;
  o.base_path = t / "global";
  o.local_path = t / "local";
  o.host = "nodeA";
  o.levels = levels;
  return o;
}

// Writes versions of v[i] = step for steps 1..n.
void WriteSteps(const Options& o, int n, std::vector<double>* v) {
  Checkpoint cp("a", o);
  cp.add("v", *v);
  cp.commit();
  for (int s = 1; s <= n; ++s) {
    std::fill(v->begin(), v->end(), static_cast<double>(s));
    cp.write(s);
  }
}

int64_t Restart(const Options& o, std::vector<double>* v) {
  Checkpoint cp("a", o);
  cp.add("v", *v);
  cp.commit();
  int64_t it = 0;
  if (!cp.restart_if_needed(&it)) return -1;
  return it;
}

TEST(Levels, LocalVersionsAndBackgroundFlush) {
  TmpDir t;
  Options o = MlOpts(t, "L1,L4@2");
  std::vector<double> v(100000);
  WriteSteps(o, 5, &v);  // versions 1..5; 2 and 4 flushed; the destructor publishes the last flush
  namespace fs = std::filesystem;
  EXPECT_TRUE(fs::exists(fs::path(t / "global") / "a" / "v-4" / "MANIFEST"));
  EXPECT_FALSE(fs::exists(fs::path(t / "global") / "a" / "v-5"));
  // Newest from the node: step 5.
  std::vector<double> r(100000);
  EXPECT_EQ(Restart(o, &r), 6);
  EXPECT_EQ(r, std::vector<double>(100000, 5.0));
  // The node lost: the global level's newest, version 4 (step 4).
  fs::remove_all(fs::path(t / "local"));
  std::vector<double> g(100000);
  EXPECT_EQ(Restart(o, &g), 5);
  EXPECT_EQ(g, std::vector<double>(100000, 4.0));
}

TEST(Levels, KeepPrunesOldLocalVersions) {
  TmpDir t;
  Options o = MlOpts(t, "L1");
  o.keep = 2;
  std::vector<double> v(1000);
  WriteSteps(o, 6, &v);
  namespace fs = std::filesystem;
  int versions = 0;
  for (const auto& host : fs::directory_iterator(fs::path(t / "local") / "nodeA"))
    for (const auto& e : fs::directory_iterator(host.path()))
      if (e.path().filename().string().rfind("v-", 0) == 0) ++versions;
  EXPECT_EQ(versions, 2);
}

TEST(Levels, DamagedLocalPieceFallsBack) {
  TmpDir t;
  Options o = MlOpts(t, "L1");
  std::vector<double> v(1000);
  WriteSteps(o, 3, &v);
  namespace fs = std::filesystem;
  for (const auto& host : fs::directory_iterator(fs::path(t / "local") / "nodeA")) {
    std::fstream f(host.path() / "v-3" / "rank-0", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(200);
    f.put('\x7f');
  }
  std::vector<double> r(1000);
  EXPECT_EQ(Restart(o, &r), 3);  // version 3 is damaged: version 2 (step 2)
  EXPECT_EQ(r, std::vector<double>(1000, 2.0));
}

TEST(Levels, BadPolicyIsRefused) {
  TmpDir t;
  ExpectError([&] { Checkpoint cp("a", MlOpts(t, "L1+L7")); }, {"storage levels \"L1+L7\"", "'L7' is not a level"});
  ExpectError([&] { Checkpoint cp("a", MlOpts(t, "L4@10")); }, {"no rule applies to every version"});
  ExpectError([&] { Checkpoint cp("a", MlOpts(t, "L1@0")); }, {"@ needs a positive number"});
}

TEST(Levels, ParityNeedsSeveralFailureDomains) {
  TmpDir t;
  std::vector<double> v(10);
  ExpectError([&] { WriteSteps(MlOpts(t, "L1+L3"), 1, &v); }, {"cannot place redundancy", "parity groups (L3)"});
}

TEST(Levels, ConfigFileUnderTheEnvironment) {
  TmpDir t;
  const std::string conf = t / "revive.conf";
  {
    std::ofstream f(conf);
    f << "# a comment\n\nREVIVE_LEVELS = L1+L3,L4@5\nREVIVE_GROUP_SIZE=6\nREVIVE_KEEP=3\n";
  }
  setenv("REVIVE_CONFIG", conf.c_str(), 1);
  setenv("REVIVE_KEEP", "4", 1);  // the environment wins over the file
  Options o = Options::from_env();
  EXPECT_EQ(o.levels, "L1+L3,L4@5");
  EXPECT_EQ(o.group_size, 6);
  EXPECT_EQ(o.keep, 4);
  {
    std::ofstream f(conf);
    f << "REVIVE_GROUP_SIZE=many\n";
  }
  ExpectError([&] { Options::from_env(); }, {"REVIVE_GROUP_SIZE in " + conf, "many"});
  {
    std::ofstream f(conf);
    f << "LEVELS=L1\n";
  }
  ExpectError([&] { Options::from_env(); }, {conf + ":1", "expected REVIVE_NAME=value"});
  setenv("REVIVE_CONFIG", (t / "missing.conf").c_str(), 1);
  ExpectError([&] { Options::from_env(); }, {"missing.conf", "cannot open configuration file"});
  unsetenv("REVIVE_CONFIG");
  unsetenv("REVIVE_KEEP");
}

}  // namespace
}  // namespace revive
