// Restart with another number of ranks (N -> M): the tiling and overlap arithmetic, the manifest's record of
// the blocks, and whole restarts between thread-simulated rank counts, with every error case by message.
#include <filesystem>
#include <fstream>
#include <numeric>
#include <tuple>

#include "app_util.h"
#include "storage/distribution.h"
#include "storage/local_store.h"
#include "storage/manifest.h"
#include "thread_comm.h"

namespace revive {
namespace {

using storage::Block;
using storage::CheckTiling;
using storage::Distribution;
using testing::ExpectError;
using testing::Opts;
using testing::RunRanks;
using testing::TmpDir;

Distribution Dist(uint64_t g, std::vector<Block> blocks) { return Distribution{"x", g, 1, std::move(blocks)}; }

TEST(Tiling, ExactTilesInAnyRankOrderWithEmptyBlocks) {
  EXPECT_TRUE(CheckTiling(Dist(10, {{0, 4}, {4, 6}})).ok());
  EXPECT_TRUE(CheckTiling(Dist(10, {{5, 5}, {0, 0}, {0, 5}})).ok());
  EXPECT_TRUE(CheckTiling(Dist(0, {{0, 0}, {0, 0}})).ok());
}

TEST(Tiling, GapsOverlapsAndWrongTotalsNameKeyAndCounts) {
  auto msg = [](const Distribution& d) { return CheckTiling(d).message(); };
  EXPECT_NE(msg(Dist(10, {{0, 4}, {5, 5}})).find("key 'x' (global size 10, 2 ranks): blocks do not tile [0, 10): no rank holds [4, 5)"),
            std::string::npos) << msg(Dist(10, {{0, 4}, {5, 5}}));
  EXPECT_NE(msg(Dist(10, {{0, 6}, {5, 5}})).find("rank 1's block [5, 10) overlaps"), std::string::npos);
  EXPECT_NE(msg(Dist(10, {{0, 4}, {4, 4}})).find("no rank holds [8, 10)"), std::string::npos);
  EXPECT_NE(msg(Dist(10, {{0, 4}, {4, 7}})).find("the blocks end at 11"), std::string::npos);
  EXPECT_TRUE(CheckTiling(Dist(10, {{0, 4}, {4, 7}})).IsInvalidArgument());
}

std::tuple<uint32_t, uint64_t, uint64_t, uint64_t> Tuple(const storage::Piece& p) {
  return {p.rank, p.src, p.dst, p.count};
}

TEST(Tiling, OverlapsOfANewBlockWithTheOldOnes) {
  Distribution old = Dist(12, {{8, 4}, {0, 4}, {4, 4}});  // rank 0 holds the end
  auto p = storage::Overlaps(old, {2, 8});                 // [2, 10)
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(Tuple(p[0]), Tuple({1, 2, 0, 2}));
  EXPECT_EQ(Tuple(p[1]), Tuple({2, 0, 2, 4}));
  EXPECT_EQ(Tuple(p[2]), Tuple({0, 0, 6, 2}));
  EXPECT_TRUE(storage::Overlaps(old, {5, 0}).empty());
}

TEST(ManifestLayouts, RoundTripAsFormat2AndCheckedWhenRead) {
  storage::Manifest m;
  m.name = "c";
  m.version = 3;
  m.ranks = 2;
  m.keys = {"a", "it"};
  m.layouts.distributed.push_back({"a", 10, 3, {{0, 6}, {6, 4}}});
  m.layouts.replicated = {"it"};
  std::string t = storage::EncodeManifest(m);
  EXPECT_EQ(t.rfind("revive-manifest 2\n", 0), 0u);
  EXPECT_NE(t.find("dist=a 10 3 0:6 6:4\n"), std::string::npos) << t;
  storage::Manifest got;
  ASSERT_TRUE(storage::DecodeManifest("M", t, &got).ok());
  ASSERT_EQ(got.layouts.distributed.size(), 1u);
  EXPECT_EQ(got.layouts.distributed[0].blocks[1], (Block{6, 4}));
  EXPECT_EQ(got.layouts.distributed[0].unit, 3u);
  EXPECT_TRUE(got.layouts.IsReplicated("it"));
  // Blocks that do not tile, sealed with a valid checksum: refused when read, naming the key.
  m.layouts.distributed[0].blocks[1] = {7, 3};
  Status s = storage::DecodeManifest("M", storage::EncodeManifest(m), &got);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("M: key 'a' (global size 10, 2 ranks): blocks do not tile"), std::string::npos) << s.message();
  // Without layouts the manifest stays format 1 (what older builds read).
  m.layouts = {};
  EXPECT_EQ(storage::EncodeManifest(m).rfind("revive-manifest 1\n", 0), 0u);
}

TEST(ManifestLayouts, NodeLocalPieceDescriptionsCarryThemToo) {
  // Multi-level storage: `revive flush` publishes a global version from piece descriptions alone.
  storage::PieceMeta m;
  m.name = "c";
  m.version = 2;
  m.ranks = 2;
  m.rank = 1;
  m.host = m.holder_host = "h1";
  m.length = 10;
  m.keys = {"a", "it"};
  m.layouts.distributed.push_back({"a", 10, 1, {{0, 6}, {6, 4}}});
  m.layouts.replicated = {"it"};
  const std::string t = storage::EncodePieceMeta(m);
  EXPECT_EQ(t.rfind("revive-piece 2\n", 0), 0u);
  storage::PieceMeta got;
  ASSERT_TRUE(storage::DecodePieceMeta("P", t, &got).ok());
  ASSERT_NE(got.layouts.Find("a"), nullptr);
  EXPECT_EQ(got.layouts.Find("a")->blocks[1], (Block{6, 4}));
  EXPECT_TRUE(got.layouts.IsReplicated("it"));
  m.layouts.distributed[0].global_n = 11;
  Status s = storage::DecodePieceMeta("P", storage::EncodePieceMeta(m), &got);
  EXPECT_NE(s.message().find("P: key 'a' (global size 11, 2 ranks): blocks do not tile [0, 11): no rank holds [10, 11)"),
            std::string::npos) << s.message();
  m.layouts = {};
  EXPECT_EQ(storage::EncodePieceMeta(m).rfind("revive-piece 1\n", 0), 0u);
}

// The global array: element i of "a" is 0.5 * i + gen, row r of "rows" holds 3 * r + c + gen.
constexpr uint64_t kN = 1001, kRows = 37, kCols = 3;
Block Share(uint64_t n, int rank, int ranks) {
  uint64_t base = n / ranks, extra = n % ranks, r = static_cast<uint64_t>(rank);
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

struct Program {
  std::vector<double> a;
  std::vector<int32_t> rows;
  int64_t gen = 0;
  std::string label;
  Block b, rb;
  void Register(Checkpoint& cp, int rank, int ranks, uint64_t n = kN) {
    b = Share(n, rank, ranks);
    rb = Share(kRows, rank, ranks);
    a.assign(b.count, 0);  // the vector of a program that has not computed anything yet
    rows.assign(rb.count * kCols, -1);
    cp.add_distributed("a", a, b.count, b.offset, n);
    cp.add_distributed_rows("rows", rows.data(), rb.count, kCols, rb.offset, kRows);
    cp.add_replicated("gen", &gen);
    cp.add_replicated("label", label);
  }
  void Fill(int64_t g) {
    gen = g;
    label = "gen " + std::to_string(g);
    for (uint64_t i = 0; i < b.count; ++i) a[i] = 0.5 * double(b.offset + i) + double(g);
    for (uint64_t r = 0; r < rb.count; ++r)
      for (uint64_t c = 0; c < kCols; ++c) rows[r * kCols + c] = int32_t(3 * (rb.offset + r) + c + g);
  }
  bool Holds(int64_t g) const {
    if (gen != g || label != "gen " + std::to_string(g)) return false;
    for (uint64_t i = 0; i < b.count; ++i)
      if (a[i] != 0.5 * double(b.offset + i) + double(g)) return false;
    for (uint64_t r = 0; r < rb.count; ++r)
      for (uint64_t c = 0; c < kCols; ++c)
        if (rows[r * kCols + c] != int32_t(3 * (rb.offset + r) + c + g)) return false;
    return true;
  }
};

void Write(const TmpDir& t, int ranks, int64_t gens, bool compress = false) {
  auto errors = RunRanks(ranks, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    Options o = Opts(t);
    o.compress = compress;
    Checkpoint cp("nm", comm, o);
    Program p;
    p.Register(cp, rank, ranks);
    cp.commit();
    for (int64_t g = 1; g <= gens; ++g) {
      p.Fill(g);
      cp.write(g);
    }
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
}

void ExpectRestart(const TmpDir& t, int ranks, int64_t gen) {
  std::vector<int> ok(ranks);
  auto errors = RunRanks(ranks, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    Checkpoint cp("nm", comm, Opts(t));
    Program p;
    p.Register(cp, rank, ranks);
    cp.commit();
    int64_t it = 0;
    if (!cp.restart_if_needed(&it)) throw Error("nothing read");
    ok[rank] = it == gen + 1 && p.Holds(gen) && p.a.size() == p.b.count;
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(errors[r], "") << r;
    EXPECT_TRUE(ok[r]) << ranks << " ranks, rank " << r;
  }
}

TEST(RankCount, FourToTwoToThreeToOneAndBack) {
  TmpDir t;
  Write(t, 4, 2);
  ExpectRestart(t, 2, 2);
  ExpectRestart(t, 3, 2);
  ExpectRestart(t, 1, 2);
  ExpectRestart(t, 5, 2);
  ExpectRestart(t, 4, 2);  // as written
}

TEST(RankCount, CompressedFilesAndOneRankToMany) {
  TmpDir t;
  Write(t, 1, 1, /*compress=*/true);
  ExpectRestart(t, 3, 1);
}

TEST(RankCount, DamageOutsideTheRangeReadIsStillFound) {
  TmpDir t;
  Write(t, 2, 2);
  // Old rank 0's "a" holds [0, 501); the damaged element (16) is in new rank 0's block (of 3: [0, 334)).
  // New rank 1 ([334, 667)) reads only [334, 501) from that file and must find the damage all the same.
  {
    std::fstream f(t / "cp/nm/v-2/a.0", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  ::testing::internal::CaptureStderr();
  ExpectRestart(t, 3, 1);  // falls back to version 1
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("v-2/a.0: payload checksum mismatch"), std::string::npos) << err;
}

// Program's keys (with a global size of n for "a") and, with `extra`, a private int; writes or restarts.
std::vector<std::string> RunProgram(const TmpDir& t, int ranks, bool restart, bool extra, uint64_t n = kN) {
  return RunRanks(ranks, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    Checkpoint cp("nm", comm, Opts(t));
    Program p;
    p.Register(cp, rank, ranks, n);
    int x = 7;
    if (extra) cp.add("x", &x);
    cp.commit();
    if (restart) cp.restart_if_needed();
    else cp.write(1);
  });
}

TEST(RankCount, PrivateKeyIsAnErrorNamingKeyAndCounts) {
  TmpDir t;
  for (const auto& e : RunProgram(t, 2, false, true)) ASSERT_EQ(e, "");
  for (const auto& e : RunProgram(t, 3, true, true))
    EXPECT_NE(e.find("was written by 2 ranks, this run has 3: key 'x' is private to each rank"), std::string::npos) << e;
}

TEST(RankCount, ChangedGlobalSizeIsAnError) {
  TmpDir t;
  for (const auto& e : RunProgram(t, 2, false, false)) ASSERT_EQ(e, "");
  for (const auto& e : RunProgram(t, 2, true, false, kN + 1))
    EXPECT_NE(e.find("distributed key 'a': " + (t / "cp/nm/v-1") + " holds 1001 x 1 elements, this run declares 1002 x 1"),
              std::string::npos) << e;
}

TEST(RankCount, BlocksThatDoNotTileAreRefusedAtCommit) {
  TmpDir t;
  auto errors = RunRanks(3, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    Checkpoint cp("nm", comm, Opts(t));
    std::vector<double> a(10);
    cp.add_distributed("a", a.data(), 10, rank == 2 ? 21 : 10 * rank, 30);  // rank 2 leaves [20, 21) out
    cp.commit();
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("add_distributed: key 'a' (global size 30, 3 ranks): blocks do not tile [0, 30): no rank holds [20, 21)"),
              std::string::npos) << e;
}

TEST(RankCount, RanksThatDisagreeOnTheGlobalSizeAllThrow) {
  TmpDir t;
  auto errors = RunRanks(3, [&](int rank, std::shared_ptr<detail::Comm> comm) {
    Checkpoint cp("nm", comm, Opts(t));
    std::vector<double> a(10);
    cp.add_distributed("a", a.data(), 10, 10 * rank, rank == 1 ? 31 : 30);
    cp.commit();
  });
  EXPECT_NE(errors[0].find("distributed key 'a': rank 1 declares 31 x 1 elements, rank 0 30 x 1"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("distributed key 'a': rank 0 declares 30 x 1 elements, rank 1 31 x 1"), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[2].find("rank 1 declares 31"), std::string::npos) << errors[2];
}

TEST(RankCount, VectorResizedAfterCommitIsRefusedAtWrite) {
  TmpDir t;
  ExpectError([&] {
    Checkpoint cp("nm", Opts(t));
    std::vector<double> a(10);
    cp.add_distributed("a", a, 10, 0, 10);
    cp.commit();
    a.resize(11);
    cp.write(1);
  }, {"distributed key 'a' holds 11 elements but was registered with 10"});
}

}  // namespace
}  // namespace revive
