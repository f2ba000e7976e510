// The MPI-free parts of librevive_rma: checksum-group placement over failure domains, the XOR parity's
// ability to rebuild any one member, and the log records' format and replay order.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "rma/access_log.h"
#include "rma/loss_verdict.h"
#include "rma/placement.h"
#include "rma/xor_code.h"

using namespace revive::rma;

TEST(Placement, NoGroupHasTwoMembersOnOneHost) {
  // 8 ranks, 2 per host on 4 hosts, groups of 4: each group takes one rank of each host.
  std::vector<std::string> d = {"r1/a", "r1/a", "r1/b", "r1/b", "r2/c", "r2/c", "r2/d", "r2/d"};
  Placement p = PlaceGroups(d, 4, 0);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_TRUE(p.warning.empty()) << p.warning;
  for (auto& g : p.groups) {
    std::set<std::string> hosts;
    for (int r : g) hosts.insert(d[r]);
    EXPECT_EQ(hosts.size(), g.size());
  }
  for (int r = 0; r < 8; ++r) EXPECT_GE(p.group_of[r], 0);
}

TEST(Placement, RackLevelSpreadsOverRacks) {
  std::vector<std::string> d = {"r1/a", "r1/b", "r2/c", "r2/d"};
  Placement p = PlaceGroups(d, 2, 1);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_TRUE(p.warning.empty()) << p.warning;
  for (auto& g : p.groups) EXPECT_NE(d[g[0]].substr(0, 2), d[g[1]].substr(0, 2));
}

TEST(Placement, OneHostStillGetsGroupsAndAWarning) {
  std::vector<std::string> d = {"vm/vm", "vm/vm", "vm/vm", "vm/vm"};
  Placement p = PlaceGroups(d, 2, 0);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_NE(p.warning.find("rank order"), std::string::npos) << p.warning;
  for (int r = 0; r < 4; ++r) EXPECT_GE(p.group_of[r], 0);
}

TEST(Placement, EveryRankInExactlyOneGroupOfAtLeastTwo) {
  for (int n = 2; n <= 13; ++n)
    for (int size = 2; size <= 6; ++size)
      for (int level : {-1, 0}) {
        std::vector<std::string> d;
        for (int r = 0; r < n; ++r) d.push_back("r/h" + std::to_string(r % 3));
        Placement p = PlaceGroups(d, size, level);
        std::vector<int> seen(n, 0);
        for (auto& g : p.groups) {
          EXPECT_GE(g.size(), 2u) << n << " " << size;
          for (int r : g) seen[r]++;
        }
        for (int r = 0; r < n; ++r) EXPECT_EQ(seen[r], 1) << n << " " << size;
      }
}

TEST(XorCode, AnyOneMemberIsRebuiltFromTheOthers) {
  std::mt19937_64 rng(7);
  for (int k = 2; k <= 6; ++k)
    for (size_t bytes : {1ul, 7ul, 64ul, 1000ul, 4099ul}) {
      const size_t c = ChunkBytes(bytes, k);
      std::vector<std::vector<uint8_t>> data(k, std::vector<uint8_t>(bytes));
      for (auto& d : data)
        for (auto& b : d) b = static_cast<uint8_t>(rng());
      // Reduce-scatter with XOR, done by hand.
      std::vector<uint8_t> sum(k * c, 0), contrib(k * c);
      for (int m = 0; m < k; ++m) {
        ParityContribution(data[m].data(), bytes, k, m, contrib.data());
        for (size_t i = 0; i < sum.size(); ++i) sum[i] ^= contrib[i];
      }
      std::vector<std::vector<uint8_t>> parity(k);
      for (int j = 0; j < k; ++j) parity[j].assign(sum.begin() + j * c, sum.begin() + (j + 1) * c);
      for (int f = 0; f < k; ++f) {
        std::vector<uint8_t> rebuilt((k - 1) * c, 0), part((k - 1) * c);
        for (int m = 0; m < k; ++m) {
          if (m == f) continue;
          RebuildContribution(data[m].data(), bytes, parity[m].data(), k, m, f, part.data());
          for (size_t i = 0; i < rebuilt.size(); ++i) rebuilt[i] ^= part[i];
        }
        ASSERT_EQ(0, std::memcmp(rebuilt.data(), data[f].data(), bytes)) << "k=" << k << " bytes=" << bytes << " f=" << f;
        // A damaged parity byte shows in the rebuild (the check can fail).
        parity[(f + 1) % k][0] ^= 1;
        std::vector<uint8_t> bad((k - 1) * c, 0);
        for (int m = 0; m < k; ++m) {
          if (m == f) continue;
          RebuildContribution(data[m].data(), bytes, parity[m].data(), k, m, f, part.data());
          for (size_t i = 0; i < bad.size(); ++i) bad[i] ^= part[i];
        }
        parity[(f + 1) % k][0] ^= 1;
        EXPECT_NE(0, std::memcmp(bad.data(), data[f].data(), std::min(bytes, bad.size())));
      }
    }
}

TEST(AccessLog, RecordsRoundTripAndDamageIsNamed) {
  LogBuffer log;
  for (int i = 0; i < 5; ++i) {
    Determinant d;
    d.kind = static_cast<uint8_t>(i % 2 ? Kind::kAcc : Kind::kPut);
    d.origin = i;
    d.len = 3 + i;
    d.gnc = 5 - i;
    d.seq = i;
    uint8_t* p = log.Append(d);
    std::memset(p, 'a' + i, d.len);
  }
  std::vector<RecordView> recs;
  std::string err;
  const std::vector<uint8_t> raw = log.Contiguous();
  ASSERT_EQ(raw.size(), log.bytes());
  ASSERT_TRUE(ParseRecords(raw.data(), raw.size(), &recs, &err)) << err;
  ASSERT_EQ(recs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(recs[i].det.len, 3u + i);
    EXPECT_EQ(recs[i].data[0], 'a' + i);
  }
  SortForReplay(&recs);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(recs[i].det.gnc, static_cast<uint64_t>(i + 1));
  // Truncated: the parse stops and says where.
  recs.clear();
  EXPECT_FALSE(ParseRecords(raw.data(), raw.size() - 3, &recs, &err));
  EXPECT_NE(err.find("claims"), std::string::npos) << err;
  // A zero word ends a log slice: what follows it is not read.
  std::vector<uint8_t> slice = raw;
  slice.resize(raw.size() + 8 + 100, 0xee);
  std::fill(slice.begin() + raw.size(), slice.begin() + raw.size() + 8, 0);
  recs.clear();
  ASSERT_TRUE(ParseRecords(slice.data(), slice.size(), &recs, &err)) << err;
  EXPECT_EQ(recs.size(), 5u);
  // Garbage.
  std::vector<uint8_t> junk(200, 0xee);
  recs.clear();
  EXPECT_FALSE(ParseRecords(junk.data(), junk.size(), &recs, &err));
  EXPECT_NE(err.find("not a record"), std::string::npos) << err;
}

TEST(AccessLog, BlocksAreReusedAfterClearAndBigRecordsFit) {
  LogBuffer log;
  Determinant d;
  d.kind = static_cast<uint8_t>(Kind::kPut);
  for (int round = 0; round < 3; ++round) {
    d.len = 700 * 1024;  // two of these do not fit in one 1 MiB block
    for (int i = 0; i < 5; ++i) std::memset(log.Append(d), 'a' + i, d.len);
    d.len = 3 << 20;  // bigger than a block
    std::memset(log.Append(d), 'z', d.len);
    std::vector<RecordView> recs;
    std::string err;
    const auto raw = log.Contiguous();
    ASSERT_TRUE(ParseRecords(raw.data(), raw.size(), &recs, &err)) << err;
    ASSERT_EQ(recs.size(), 6u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(recs[i].data[700 * 1024 - 1], 'a' + i);
    EXPECT_EQ(recs[5].data[(3 << 20) - 1], 'z');
    log.Clear();
    EXPECT_EQ(log.bytes(), 0u);
  }
}

TEST(AccessLog, ReplayOrderKeepsEachOriginsEpochsAndLockOrder) {
  std::vector<RecordView> recs;
  auto add = [&](int origin, uint64_t gnc, uint64_t sc, uint64_t ec, uint64_t seq) {
    RecordView v;
    v.det.origin = origin;
    v.det.gnc = gnc;
    v.det.sc = sc;
    v.det.ec = ec;
    v.det.seq = seq;
    recs.push_back(v);
  };
  add(1, 0, 2, 9, 9);  // origin 1's second lock epoch at the target
  add(0, 0, 1, 3, 4);  // origin 0's lock epoch came first (SC 1)
  add(0, 0, 1, 3, 2);
  add(2, 1, 0, 0, 1);  // after the next gsync
  SortForReplay(&recs);
  EXPECT_EQ(recs[0].det.seq, 2u);
  EXPECT_EQ(recs[1].det.seq, 4u);
  EXPECT_EQ(recs[2].det.origin, 1);
  EXPECT_EQ(recs[3].det.origin, 2);
}

// The survivors' verdict on a death (rank_watch.h): one loss per checksum group with complete logs is
// rebuildable; every other case says why not.
namespace {
std::vector<SurvivorReport> Survivors(std::vector<int> ranks, int world, uint64_t epoch) {
  std::vector<SurvivorReport> r;
  for (int p : ranks) {
    SurvivorReport s;
    s.rank = p;
    s.epoch = epoch;
    s.gaps.assign(static_cast<size_t>(world), 0);
    r.push_back(s);
  }
  return r;
}
const std::vector<std::vector<int>> kGroups = {{0, 1}, {2, 3}};
}  // namespace

TEST(LossVerdict, OneLossPerGroupWithCompleteLogsIsRebuildable) {
  LossVerdict v = JudgeLoss({2}, kGroups, Survivors({0, 1, 3}, 4, 5));
  EXPECT_TRUE(v.rebuildable) << v.why;
  EXPECT_EQ(v.epoch, 5u);
  EXPECT_NE(v.why.find("group {2,3} lost only rank 2"), std::string::npos) << v.why;
}

TEST(LossVerdict, TwoLossesInOneGroupAreNot) {
  LossVerdict v = JudgeLoss({2, 3}, kGroups, Survivors({0, 1}, 4, 5));
  EXPECT_FALSE(v.rebuildable);
  EXPECT_NE(v.why.find("group {2,3} lost ranks 2, 3"), std::string::npos) << v.why;
}

TEST(LossVerdict, LossesInTwoGroupsLoseTheirMutualLogs) {
  LossVerdict v = JudgeLoss({1, 3}, kGroups, Survivors({0, 2}, 4, 5));
  EXPECT_FALSE(v.rebuildable);
  EXPECT_NE(v.why.find("ranks 1, 3 died together"), std::string::npos) << v.why;
}

TEST(LossVerdict, NoCheckpointOrOneInProgressOrGapsAreNot) {
  EXPECT_NE(JudgeLoss({2}, kGroups, Survivors({0, 1, 3}, 4, 0)).why.find("no in-memory checkpoint"), std::string::npos);
  auto r = Survivors({0, 1, 3}, 4, 5);
  r[1].in_checkpoint = true;
  LossVerdict v = JudgeLoss({2}, kGroups, r);
  EXPECT_FALSE(v.rebuildable);
  EXPECT_NE(v.why.find("checkpoint 6 was being taken (rank 1"), std::string::npos) << v.why;
  r = Survivors({0, 1, 3}, 4, 5);
  r[2].epoch = 6;  // one survivor already past the next checkpoint: the others are inside it
  EXPECT_FALSE(JudgeLoss({2}, kGroups, r).rebuildable);
  r = Survivors({0, 1, 3}, 4, 5);
  r[0].gaps[2] = kGapPutLayout;
  v = JudgeLoss({2}, kGroups, r);
  EXPECT_FALSE(v.rebuildable);
  EXPECT_NE(v.why.find("rank 0 put to rank 2 with a non-contiguous"), std::string::npos) << v.why;
  r = Survivors({0, 1, 3}, 4, 5);
  r[2].gaps[2] = kGapGetLost;
  v = JudgeLoss({2}, kGroups, r);
  EXPECT_FALSE(v.rebuildable);
  EXPECT_NE(v.why.find("rank 2's get log at rank 3 overflowed"), std::string::npos) << v.why;
  r = Survivors({0, 1, 3}, 4, 5);
  r[1].unprotected = true;
  EXPECT_NE(JudgeLoss({2}, kGroups, r).why.find("sub-communicator"), std::string::npos);
  // A gap about another rank does not matter; an open get epoch is a note, not a failure.
  r = Survivors({0, 1, 3}, 4, 5);
  r[0].gaps[1] = kGapPutLayout;
  r[1].gaps[2] = kGapGetOpen;
  v = JudgeLoss({2}, kGroups, r);
  EXPECT_TRUE(v.rebuildable) << v.why;
  EXPECT_NE(v.why.find("open epoch at rank(s) 1"), std::string::npos) << v.why;
}

// The rebuild uses the newest checkpoint every survivor of the group holds complete: with a death inside
// checkpoint 6, one survivor may hold {5, 6} and another {5, 6 incomplete}: 5 is the answer, and a
// survivor that never completed one gives none.
TEST(LossVerdict, RebuildUsesTheNewestCheckpointCompleteAtEverySurvivor) {
  const std::vector<WinGens> a = {{1, {5, 6}}, {2, {3, 0}}}, b = {{1, {5, 0}}, {2, {3, 4}}}, c = {{1, {6, 7}}};
  EXPECT_EQ(NewestCommon({&a, &b}, 1), 5u);
  EXPECT_EQ(NewestCommon({&a, &a}, 1), 6u);
  EXPECT_EQ(NewestCommon({&a, &b}, 2), 3u);
  EXPECT_EQ(NewestCommon({&a, &c}, 1), 6u);
  EXPECT_EQ(NewestCommon({&b, &c}, 1), 0u);
  EXPECT_EQ(NewestCommon({&a, &b}, 9), 0u);
  EXPECT_EQ(NewestCommon({}, 1), 0u);
}

// With a stride, the slots land further apart and the bytes between them (the caller's) are left alone.
TEST(XorCode, StrideLeavesTheCallersBytes) {
  const int k = 3;
  std::vector<uint8_t> data(100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  const size_t c = ChunkBytes(data.size(), k), stride = c + 5;
  std::vector<uint8_t> flat(k * c), wide(k * stride, 0xee);
  ParityContribution(data.data(), data.size(), k, 1, flat.data());
  ParityContribution(data.data(), data.size(), k, 1, wide.data(), stride);
  for (int j = 0; j < k; ++j) {
    EXPECT_TRUE(std::equal(flat.begin() + j * c, flat.begin() + (j + 1) * c, wide.begin() + j * stride));
    for (size_t b = c; b < stride; ++b) EXPECT_EQ(wide[j * stride + b], 0xee);
  }
}
