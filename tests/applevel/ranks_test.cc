// The collective logic through detail::Comm, with ranks simulated by threads (the MPI flavour only
// swaps the Comm): files <key>.<rank>, one manifest by rank 0, agreement on the version to restart from
// when only one rank's file is damaged, and errors raised on every rank together.
#include <barrier>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "app_util.h"
#include "thread_comm.h"

namespace revive {
namespace {

using testing::Opts;
using testing::RunRanks;
using testing::TmpDir;

void WriteVersions(const TmpDir& t, int ranks, int versions) {
  auto errors = RunRanks(ranks, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    std::vector<int> v(1000);
    Checkpoint cp("par", comm, Opts(t));
    cp.add("v", v);
    cp.commit();
    for (int k = 1; k <= versions; ++k) {
      std::fill(v.begin(), v.end(), 100 * rank + k);
      cp.write(k);
    }
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
}

TEST(Ranks, FilesPerRankAndOneManifest) {
  TmpDir t;
  WriteVersions(t, 3, 2);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(std::filesystem::exists(t / ("cp/par/v-2/v." + std::to_string(r))));
  EXPECT_TRUE(std::filesystem::exists(t / "cp/par/v-2/MANIFEST"));
  EXPECT_FALSE(std::filesystem::exists(t / "cp/par/v-2/v"));
}

TEST(Ranks, OneDamagedRankMakesEveryRankFallBack) {
  TmpDir t;
  WriteVersions(t, 3, 3);
  {
    std::fstream f(t / "cp/par/v-3/v.1", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put('\x7f');
  }
  std::vector<int64_t> its(3);
  std::vector<int> vals(3);
  ::testing::internal::CaptureStderr();
  auto errors = RunRanks(3, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    std::vector<int> v;
    Checkpoint cp("par", comm, Opts(t));
    cp.add("v", v);
    cp.commit();
    int64_t it = 0;
    if (!cp.restart_if_needed(&it)) throw Error("nothing read");
    its[rank] = it;
    vals[rank] = v.at(999);
  });
  std::string err = ::testing::internal::GetCapturedStderr();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(its[r], 3) << r;  // version 2, written at iteration 2
    EXPECT_EQ(vals[r], 100 * r + 2) << r;
  }
  EXPECT_NE(err.find("v-3/v.1"), std::string::npos) << err;
  EXPECT_NE(err.find("falling back"), std::string::npos) << err;
}

TEST(Ranks, MismatchOnOneRankIsAnErrorOnAll) {
  TmpDir t;
  WriteVersions(t, 2, 1);
  auto errors = RunRanks(2, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    Checkpoint cp("par", comm, Opts(t));
    std::vector<int> v;
    std::vector<float> w;
    if (rank == 0) cp.add("v", v);
    else cp.add("v", w);
    cp.commit();
    cp.restart_if_needed();
  });
  EXPECT_NE(errors[1].find("stored as int32"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("another rank"), std::string::npos) << errors[0];
}

TEST(Ranks, DifferentNumberOfRanksIsAnError) {
  TmpDir t;
  WriteVersions(t, 2, 1);
  auto errors = RunRanks(3, [&](int, std::shared_ptr<detail::Comm> comm) {
    std::vector<int> v;
    Checkpoint cp("par", comm, Opts(t));
    cp.add("v", v);
    cp.commit();
    cp.restart_if_needed();
  });
  for (const auto& e : errors) EXPECT_NE(e.find("written by 2 ranks, this run has 3"), std::string::npos) << e;
}

}  // namespace
}  // namespace revive
