// Erasure code, rotated stripes and placement over failure domains: the code against a naive GF(2^8)
// reference, every survivable loss of a group rebuilt byte for byte, and group/partner properties over
// random topologies.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "storage/erasure.h"
#include "storage/placement.h"
#include "storage/stripes.h"

namespace revive::storage {
namespace {

// GF(2^8) with ISA-L's polynomial x^8 + x^4 + x^3 + x^2 + 1, bit by bit.
uint8_t GfMul(uint8_t a, uint8_t b) {
  uint8_t p = 0;
  for (int i = 0; i < 8; ++i) {
    if (b & 1) p ^= a;
    const bool carry = a & 0x80;
    a = static_cast<uint8_t>(a << 1);
    if (carry) a ^= 0x1d;
    b >>= 1;
  }
  return p;
}
uint8_t GfInv(uint8_t a) {
  for (int x = 1; x < 256; ++x)
    if (GfMul(a, static_cast<uint8_t>(x)) == 1) return static_cast<uint8_t>(x);
  return 0;
}

// Parity j of the reference code: XOR for m == 1, else the Cauchy row 1 / ((k + j) ^ i).
std::vector<uint8_t> RefParity(int k, int m, int j, const std::vector<std::vector<uint8_t>>& data, size_t len) {
  std::vector<uint8_t> p(len, 0);
  for (int i = 0; i < k; ++i) {
    const uint8_t c = m == 1 ? 1 : GfInv(static_cast<uint8_t>((k + j) ^ i));
    for (size_t b = 0; b < len; ++b) p[b] ^= GfMul(c, data[i][b]);
  }
  return p;
}

std::string Random(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Every subset of {0..n-1} with 1..max elements, as presence masks (false = lost).
std::vector<std::vector<bool>> Losses(int n, int max) {
  std::vector<std::vector<bool>> out;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) > max) continue;
    std::vector<bool> present(n);
    for (int i = 0; i < n; ++i) present[i] = !(mask >> i & 1);
    out.push_back(present);
  }
  return out;
}

TEST(ErasureCode, RejectsBadShapes) {
  std::unique_ptr<ErasureCode> c;
  for (auto [k, m] : {std::pair{0, 1}, {1, 0}, {-1, 2}, {250, 6}}) {
    Status s = ErasureCode::Make(k, m, &c);
    EXPECT_TRUE(s.IsInvalidArgument()) << k << " " << m;
    EXPECT_NE(s.message().find("k=" + std::to_string(k)), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("m=" + std::to_string(m)), std::string::npos) << s.ToString();
  }
  ASSERT_TRUE(ErasureCode::Make(250, 5, &c).ok());
  EXPECT_EQ(c->k(), 250);
  EXPECT_EQ(c->m(), 5);
}

// Encode against the reference, and Reconstruct of every survivable erasure, over odd lengths and
// unaligned blocks (offset 1) as well as aligned ones (the ISA-L XOR path).
TEST(ErasureCode, MatchesNaiveReference) {
  std::mt19937_64 rng(7);
  for (int k : {1, 2, 3, 5, 10}) {
    for (int m : {1, 2, 3, 4}) {
      std::unique_ptr<ErasureCode> code;
      ASSERT_TRUE(ErasureCode::Make(k, m, &code).ok());
      for (size_t len : {0, 1, 7, 31, 32, 33, 64, 100, 1000, 4096 + 96}) {
        for (size_t shift : {0, 1}) {
          // One 64-aligned buffer per block, each block at `shift` into it.
          std::vector<std::vector<uint8_t>> store(k + m, std::vector<uint8_t>(len + 128));
          std::vector<uint8_t*> blk(k + m);
          std::vector<std::vector<uint8_t>> data(k);
          for (int i = 0; i < k + m; ++i) {
            auto p = reinterpret_cast<uintptr_t>(store[i].data());
            blk[i] = reinterpret_cast<uint8_t*>((p + 63) / 64 * 64) + shift;
            if (i < k) {
              for (size_t b = 0; b < len; ++b) blk[i][b] = static_cast<uint8_t>(rng());
              data[i].assign(blk[i], blk[i] + len);
            }
          }
          code->Encode(len, blk.data(), blk.data() + k);
          for (int j = 0; j < m; ++j)
            ASSERT_EQ(std::vector<uint8_t>(blk[k + j], blk[k + j] + len), RefParity(k, m, j, data, len))
                << "k=" << k << " m=" << m << " len=" << len << " shift=" << shift << " parity " << j;
          for (int j = 0; j < m; ++j) {  // one row alone (a distributed encode's member): the same bytes
            std::vector<uint8_t> one(len + 1, 0xCD);
            code->EncodeOne(len, blk.data(), j, one.data() + shift);
            ASSERT_EQ(std::vector<uint8_t>(one.begin() + shift, one.begin() + shift + len), RefParity(k, m, j, data, len))
                << "EncodeOne k=" << k << " m=" << m << " len=" << len << " row " << j;
          }
          if (k + m > 8 || len > 1000) continue;  // every erasure pattern of the small codes only
          std::vector<std::vector<uint8_t>> want(k + m);
          for (int i = 0; i < k + m; ++i) want[i].assign(blk[i], blk[i] + len);
          for (const auto& present : Losses(k + m, m)) {
            for (int i = 0; i < k + m; ++i)
              if (!present[i]) std::fill(blk[i], blk[i] + len, 0xAB);
            ASSERT_TRUE(code->Reconstruct(len, blk.data(), present).ok());
            for (int i = 0; i < k + m; ++i)
              ASSERT_EQ(std::vector<uint8_t>(blk[i], blk[i] + len), want[i])
                  << "k=" << k << " m=" << m << " len=" << len << " block " << i;
          }
        }
      }
    }
  }
}

TEST(ErasureCode, TooManyMissing) {
  std::unique_ptr<ErasureCode> code;
  ASSERT_TRUE(ErasureCode::Make(4, 2, &code).ok());
  std::vector<std::vector<uint8_t>> b(6, std::vector<uint8_t>(64));
  std::vector<uint8_t*> p;
  for (auto& v : b) p.push_back(v.data());
  Status s = code->Reconstruct(64, p.data(), {true, false, true, false, false, true});
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("3 of 6 blocks are missing"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("tolerates at most 2"), std::string::npos) << s.ToString();
}

TEST(StripeLayout, EveryBlockOnceParityRotated) {
  for (int g = 2; g <= 12; ++g) {
    for (int m = 1; m < g && m <= 4; ++m) {
      StripeLayout l(g, m, 1000);
      const int k = g - m;
      EXPECT_EQ(l.block_size() % 64, 0u);
      EXPECT_GE(l.block_size() * k, 1000u);
      std::set<std::pair<int, int>> used;  // (member, j)
      std::vector<int> parity_count(g);
      for (int s = 0; s < g; ++s) {
        std::set<int> in_stripe;
        for (int t = 0; t < m; ++t) {
          in_stripe.insert(l.parity_holder(s, t));
          ++parity_count[l.parity_holder(s, t)];
        }
        auto db = l.data_blocks(s);
        ASSERT_EQ(static_cast<int>(db.size()), k);
        for (auto [i, j] : db) {
          EXPECT_TRUE(in_stripe.insert(i).second) << "member " << i << " twice in stripe " << s;
          EXPECT_TRUE(used.insert({i, j}).second);
          EXPECT_TRUE(j >= 0 && j < k);
        }
      }
      EXPECT_EQ(static_cast<int>(used.size()), g * k);
      for (int i = 0; i < g; ++i) {
        EXPECT_EQ(parity_count[i], m);
        auto slots = l.parity_slots(i);
        ASSERT_EQ(static_cast<int>(slots.size()), m);
        for (size_t x = 0; x < slots.size(); ++x) {
          EXPECT_EQ(l.parity_holder(slots[x].first, slots[x].second), i);
          if (x) {
            EXPECT_LT(slots[x - 1].first, slots[x].first);
          }
        }
        // Member i's blocks go to its non-parity stripes in increasing order.
        int j = 0;
        for (int s = 0; s < g; ++s) {
          for (auto [mi, mj] : l.data_blocks(s)) {
            if (mi == i) {
              EXPECT_EQ(mj, j++);
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(StripeLayout(4, 1, 0).block_size(), 0u);
  EXPECT_EQ(StripeLayout(4, 1, 1).block_size(), 64u);
  EXPECT_EQ(StripeLayout(4, 1, 193).block_size(), 128u);  // ceil(193 / 3) = 65 -> 128
}

struct Group {
  std::vector<std::string> data, parity;
  std::vector<uint64_t> lengths;
};

Group MakeGroup(std::mt19937_64& rng, const ErasureCode& code, const StripeLayout& l, std::vector<uint64_t> lengths) {
  Group grp;
  grp.lengths = lengths;
  std::vector<std::string_view> views;
  for (uint64_t n : lengths) grp.data.push_back(Random(rng, n));
  for (const auto& d : grp.data) views.push_back(d);
  EXPECT_TRUE(EncodeGroup(code, l, views, &grp.parity).ok());
  return grp;
}

// Every loss of up to m members of groups g = 2..8, m = 1..3, with unequal lengths including empty and
// one-byte members, rebuilds data and parity byte for byte; m + 1 losses are refused.
TEST(Group, RebuildsEverySurvivableLoss) {
  std::mt19937_64 rng(42);
  for (int g = 2; g <= 8; ++g) {
    for (int m = 1; m <= 3 && m < g; ++m) {
      for (int round = 0; round < 2; ++round) {
        std::vector<uint64_t> lengths(g);
        for (auto& n : lengths) n = rng() % 3000;
        lengths[0] = 0;
        if (g > 2) lengths[1] = 1;
        if (round == 1) std::shuffle(lengths.begin(), lengths.end(), rng);
        const uint64_t max_len = *std::max_element(lengths.begin(), lengths.end());
        std::unique_ptr<ErasureCode> code;
        ASSERT_TRUE(ErasureCode::Make(g - m, m, &code).ok());
        StripeLayout l(g, m, max_len);
        Group orig = MakeGroup(rng, *code, l, lengths);
        for (const auto& p : orig.parity) ASSERT_EQ(p.size(), m * l.block_size());
        for (const auto& present : Losses(g, m + 1)) {
          Group got = orig;
          int lost = 0;
          for (int i = 0; i < g; ++i) {
            if (present[i]) continue;
            ++lost;
            got.data[i] = "garbage";
            got.parity[i].clear();
          }
          Status s = RebuildGroup(*code, l, &got.data, lengths, &got.parity, present);
          if (lost > m) {
            ASSERT_TRUE(s.IsInvalidArgument());
            EXPECT_NE(s.message().find(std::to_string(lost) + " of " + std::to_string(g) + " members"),
                      std::string::npos) << s.ToString();
            EXPECT_NE(s.message().find("tolerates at most " + std::to_string(m)), std::string::npos);
            continue;
          }
          ASSERT_TRUE(s.ok()) << s.ToString();
          for (int i = 0; i < g; ++i) {
            ASSERT_TRUE(got.data[i] == orig.data[i]) << "g=" << g << " m=" << m << " member " << i;
            ASSERT_TRUE(got.parity[i] == orig.parity[i]) << "g=" << g << " m=" << m << " member " << i;
          }
        }
      }
    }
  }
}

// Blocks longer than the 256 KiB pieces a stripe is coded in, with members ending mid-piece: the
// zero-padded scratch pieces and the piece offsets into parity.
TEST(Group, BlocksLargerThanAPiece) {
  std::mt19937_64 rng(5);
  for (auto [g, m] : {std::pair{3, 1}, {4, 2}, {5, 3}}) {
    std::vector<uint64_t> lengths = {(600 << 10) + 3, (1 << 20) + 13, 5, 0, 777777};
    lengths.resize(g);
    const uint64_t max_len = *std::max_element(lengths.begin(), lengths.end());
    std::unique_ptr<ErasureCode> code;
    ASSERT_TRUE(ErasureCode::Make(g - m, m, &code).ok());
    StripeLayout l(g, m, max_len);
    ASSERT_GT(l.block_size(), 256u << 10);
    Group orig = MakeGroup(rng, *code, l, lengths);
    for (const auto& present : Losses(g, m)) {
      Group got = orig;
      for (int i = 0; i < g; ++i) {
        if (present[i]) continue;
        got.data[i].assign(3, 'x');
        got.parity[i].clear();
      }
      ASSERT_TRUE(RebuildGroup(*code, l, &got.data, lengths, &got.parity, present).ok());
      for (int i = 0; i < g; ++i) {
        ASSERT_TRUE(got.data[i] == orig.data[i]) << "g=" << g << " m=" << m << " member " << i;
        ASSERT_TRUE(got.parity[i] == orig.parity[i]) << "g=" << g << " m=" << m << " member " << i;
      }
    }
  }
}

TEST(Group, EmptyMembersAndShapeErrors) {
  std::unique_ptr<ErasureCode> code;
  ASSERT_TRUE(ErasureCode::Make(2, 1, &code).ok());
  StripeLayout l(3, 1, 0);
  std::vector<std::string> parity;
  ASSERT_TRUE(EncodeGroup(*code, l, {"", "", ""}, &parity).ok());
  ASSERT_EQ(parity, std::vector<std::string>(3));
  std::vector<std::string> data(3);
  ASSERT_TRUE(RebuildGroup(*code, l, &data, {0, 0, 0}, &parity, {true, false, true}).ok());
  EXPECT_TRUE(EncodeGroup(*code, l, {"", "x", ""}, &parity).IsInvalidArgument());  // longer than max_len
  EXPECT_TRUE(EncodeGroup(*code, l, {"", ""}, &parity).IsInvalidArgument());       // two of three members
  StripeLayout l4(4, 1, 10);
  EXPECT_TRUE(EncodeGroup(*code, l4, {"", "", "", ""}, &parity).IsInvalidArgument());  // code k=2, layout k=3
}

// The code cannot tell a corrupt survivor: a flipped parity byte silently changes the rebuilt data,
// which is why callers checksum what they read and what they rebuild.
TEST(Group, CorruptParityChangesRebuiltData) {
  std::mt19937_64 rng(3);
  for (int m : {1, 2}) {
    const int g = 5;
    std::unique_ptr<ErasureCode> code;
    ASSERT_TRUE(ErasureCode::Make(g - m, m, &code).ok());
    std::vector<uint64_t> lengths = {4000, 3000, 4096, 17, 2500};
    StripeLayout l(g, m, 4096);
    Group orig = MakeGroup(rng, *code, l, lengths);
    Group got = orig;
    // Flip a byte of the first parity block (t = 0) of a stripe that member 0 contributes data to:
    // Reconstruct reads the data blocks and then parity in order, so that block is read.
    bool flipped = false;
    for (int s = 0; s < g && !flipped; ++s) {
      if (l.parity_holder(s, 0) == 0 || (m == 2 && l.parity_holder(s, 1) == 0)) continue;
      const int h = l.parity_holder(s, 0);
      const auto slots = l.parity_slots(h);
      const size_t at = std::find(slots.begin(), slots.end(), std::make_pair(s, 0)) - slots.begin();
      got.parity[h][at * l.block_size() + 5] ^= 0x40;
      flipped = true;
    }
    ASSERT_TRUE(flipped);
    got.data[0].clear();
    got.parity[0].clear();
    std::vector<bool> present = {false, true, true, true, true};
    ASSERT_TRUE(RebuildGroup(*code, l, &got.data, lengths, &got.parity, present).ok());
    EXPECT_TRUE(got.data[0] != orig.data[0]) << "m=" << m;
  }
}

// ---- placement ----

std::vector<std::string> Hosts(const std::vector<int>& per_host) {
  std::vector<std::string> d;
  for (size_t h = 0; h < per_host.size(); ++h)
    for (int r = 0; r < per_host[h]; ++r) d.push_back("node" + std::to_string(h));
  return d;
}

// Every rank once, no shared domain within a group, min size, balanced sizes.
void CheckGroups(const std::vector<std::string>& domains, int depth, int min_size,
                 const std::vector<std::vector<int>>& groups) {
  std::vector<int> seen(domains.size());
  size_t lo = SIZE_MAX, hi = 0;
  for (const auto& grp : groups) {
    std::set<std::string> dom;
    for (int r : grp) {
      ASSERT_TRUE(r >= 0 && r < static_cast<int>(domains.size()));
      ++seen[r];
      EXPECT_TRUE(dom.insert(DomainAt(domains[r], depth)).second) << "rank " << r << " shares a domain";
    }
    EXPECT_GE(static_cast<int>(grp.size()), min_size);
    lo = std::min(lo, grp.size());
    hi = std::max(hi, grp.size());
  }
  for (size_t r = 0; r < seen.size(); ++r) EXPECT_EQ(seen[r], 1) << "rank " << r;
  if (!groups.empty()) {
    EXPECT_LE(hi - lo, 1u);
  }
}

TEST(Placement, DomainAt) {
  EXPECT_EQ(DomainAt("rack2/node17", 1), "rack2");
  EXPECT_EQ(DomainAt("rack2/node17", 0), "rack2/node17");
  EXPECT_EQ(DomainAt("rack2/node17", 2), "rack2/node17");
  EXPECT_EQ(DomainAt("rack2/node17", 5), "rack2/node17");
  EXPECT_EQ(DomainAt("a/b/c", 2), "a/b");
  EXPECT_EQ(DomainAt("node3", 1), "node3");
}

TEST(Placement, UnevenHosts) {
  const auto d = Hosts({3, 2, 1});  // ranks 0-2 node0, 3-4 node1, 5 node2
  std::vector<std::vector<int>> groups;
  ASSERT_TRUE(FormGroups(d, 0, 3, 2, &groups).ok());
  ASSERT_EQ(groups.size(), 3u);  // node0's three ranks need three groups
  CheckGroups(d, 0, 2, groups);
  Status s = FormGroups(d, 0, 3, 3, &groups);  // three groups of three would need nine ranks
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("failure domain node0 (host) holds 3 of the 6 ranks"), std::string::npos) << s.ToString();
}

TEST(Placement, TooFewDomains) {
  std::vector<std::vector<int>> groups;
  Status s = FormGroups(Hosts({2, 2, 2}), 0, 4, 2, &groups);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(),
            "group size 4 needs 4 distinct failure domains (host); the 6 ranks span only 3: node0, node1, node2");
  EXPECT_TRUE(FormGroups(Hosts({1}), 0, 4, 2, &groups).IsInvalidArgument());  // one rank, groups of >= 2
  EXPECT_TRUE(FormGroups(Hosts({2, 2}), 0, 2, 3, &groups).IsInvalidArgument());  // min size above size
  ASSERT_TRUE(FormGroups(Hosts({1, 1, 1}), 0, 8, 2, &groups).ok());  // a small job forms one group
  EXPECT_EQ(groups, (std::vector<std::vector<int>>{{0, 1, 2}}));
  ASSERT_TRUE(FormGroups({}, 0, 4, 2, &groups).ok());
  EXPECT_TRUE(groups.empty());
  EXPECT_TRUE(FormGroups({"node0", ""}, 0, 2, 2, &groups).IsInvalidArgument());
}

TEST(Placement, RackDepthForcesCrossRackGroups) {
  std::vector<std::string> d;  // 2 racks x 4 hosts x 2 ranks
  for (int rack = 0; rack < 2; ++rack)
    for (int host = 0; host < 4; ++host)
      for (int r = 0; r < 2; ++r) d.push_back("rack" + std::to_string(rack) + "/node" + std::to_string(host));
  std::vector<std::vector<int>> groups;
  ASSERT_TRUE(FormGroups(d, 1, 2, 2, &groups).ok());
  ASSERT_EQ(groups.size(), 8u);
  CheckGroups(d, 1, 2, groups);
  Status s = FormGroups(d, 1, 4, 2, &groups);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("needs 4 distinct failure domains (depth 1); the 16 ranks span only 2: rack0, rack1"),
            std::string::npos) << s.ToString();
  ASSERT_TRUE(FormGroups(d, 2, 4, 2, &groups).ok());  // hosts: 8 domains
  ASSERT_EQ(groups.size(), 4u);
  CheckGroups(d, 2, 2, groups);
}

TEST(Placement, RandomTopologies) {
  std::mt19937_64 rng(11);
  int formed = 0, refused = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const int racks = 1 + rng() % 4, hosts = 1 + rng() % 6;
    std::vector<std::string> d;
    for (int r = 0; r < racks; ++r)
      for (int h = 0; h < hosts; ++h)
        for (int n = rng() % 4; n > 0; --n) d.push_back("rack" + std::to_string(r) + "/h" + std::to_string(h));
    std::shuffle(d.begin(), d.end(), rng);
    const int depth = rng() % 3, g = 2 + rng() % 7, min_size = 1 + rng() % g;
    std::vector<std::vector<int>> groups, again;
    Status s = FormGroups(d, depth, g, min_size, &groups);
    // Feasible iff the domains can fill a group and the largest domain's ranks, one per group, leave
    // every group min_size members.
    std::map<std::string, int> count;
    for (const auto& p : d) ++count[DomainAt(p, depth)];
    int max_c = 0;
    for (auto& [k, c] : count) max_c = std::max(max_c, c);
    const int n = static_cast<int>(d.size());
    const bool feasible = n == 0 || (static_cast<int>(count.size()) >= std::min(g, n) && max_c * min_size <= n);
    ASSERT_EQ(s.ok(), feasible) << s.ToString();
    if (!s.ok()) {
      ++refused;
      continue;
    }
    ++formed;
    CheckGroups(d, depth, min_size, groups);
    ASSERT_TRUE(FormGroups(d, depth, g, min_size, &again).ok());
    EXPECT_EQ(groups, again);
    std::vector<int> partner;
    s = Partners(d, depth, &partner);
    ASSERT_EQ(s.ok(), count.size() != 1 || n == 0) << s.ToString();
    if (!s.ok()) continue;
    std::vector<int> received(n);
    for (int r = 0; r < n; ++r) {
      EXPECT_NE(DomainAt(d[partner[r]], depth), DomainAt(d[r], depth));
      ++received[partner[r]];
    }
    if (2 * max_c <= n) {
      for (int r = 0; r < n; ++r) EXPECT_EQ(received[r], 1) << "rank " << r;
    }
  }
  EXPECT_GT(formed, 100);
  EXPECT_GT(refused, 100);
}

TEST(Placement, Partners) {
  std::vector<int> p;
  ASSERT_TRUE(Partners(Hosts({2, 2, 2}), 0, &p).ok());
  EXPECT_EQ(p, (std::vector<int>{2, 3, 4, 5, 0, 1}));
  ASSERT_TRUE(Partners(Hosts({4, 1}), 0, &p).ok());  // node0 holds more than half: node1 takes four
  EXPECT_EQ(p, (std::vector<int>{4, 4, 4, 4, 0}));
  Status s = Partners(Hosts({3}), 0, &p);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("all 3 ranks share one failure domain (host: node0)"), std::string::npos) << s.ToString();
  EXPECT_TRUE(Partners({"r0/a", "r0/b"}, 1, &p).IsInvalidArgument());
  ASSERT_TRUE(Partners({"r0/a", "r0/b"}, 2, &p).ok());
}

}  // namespace
}  // namespace revive::storage
