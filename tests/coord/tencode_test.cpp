// The distributed L3 encode (coord/tencode.h): members on real sockets, one thread each, write byte for
// byte the parity and parity.meta that TEncodeGroup computes from the whole group's data, receive about
// m x Lmax bytes each (not (g - 1) x D); the distributed rebuild (coord/trebuild.h) restores members wiped
// after it byte for byte, receiving k blocks per stripe; the encode again for some members only (writers).
// Cases the three-host CI groups do not reach: g=4 with m=2 and two members lost, members of different
// sizes, one with no images, images larger than the exchange's pieces; a member of another generation.
#include "coord/tencode.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "coord/tparity.h"
#include "coord/trebuild.h"
#include "core/env.h"

namespace revive::coord {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class TEncodeTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = "/tmp/revive-tencode-test-" + std::to_string(getpid()); }
  void TearDown() override {
    for (int fd : fds_) close(fd);
    fs::remove_all(dir_);
  }

  // Member j's images: sizes[j] holds one size per image (random bytes), in <dir_>/<tree>/<host>/.
  void MakeGroup(int g, const std::vector<std::vector<size_t>>& sizes) {
    std::mt19937_64 rng(1234);
    hosts_.clear();
    paths_.assign((size_t)g, {});
    xxh_.assign((size_t)g, {});
    for (int j = 0; j < g; j++) {
      hosts_.push_back("h" + std::to_string(j + 1));
      fs::create_directories(Dir("enc", j));
      for (size_t i = 0; i < sizes[(size_t)j].size(); i++) {
        std::string bytes(sizes[(size_t)j][i], '\0');
        for (auto& c : bytes) c = (char)rng();
        const std::string p = Dir("enc", j) + "/img-" + std::to_string(9 - i) + ".rimg";  // name order != creation order
        std::ofstream(p, std::ios::binary) << bytes;
        paths_[(size_t)j].push_back(p);
        uint64_t h = 0;
        ASSERT_TRUE(FileXxh3(p, &h).ok());
        xxh_[(size_t)j].push_back(h);
      }
    }
  }
  std::string Dir(const std::string& tree, int j) const { return dir_ + "/" + tree + "/" + hosts_[(size_t)j]; }

  // Every member encodes at once; gens[j] is the generation member j says it encodes.
  std::vector<Status> Encode(int m, const std::vector<uint64_t>& gens, std::vector<TEncodeStats>* stats,
                             double timeout_s = 10, std::vector<bool> writers = {}) {
    const size_t g = hosts_.size();
    std::vector<int> fds(g);
    std::vector<std::string> addrs;
    for (size_t j = 0; j < g; j++) {
      uint16_t port = 0;
      EXPECT_TRUE(TlxListen("127.0.0.1", &fds[j], &port).ok());
      fds_.push_back(fds[j]);
      addrs.push_back("127.0.0.1:" + std::to_string(port));
    }
    std::vector<Status> st(g);
    stats->assign(g, {});
    std::vector<std::thread> ts;
    for (size_t j = 0; j < g; j++)
      ts.emplace_back([&, j] {
        st[j] = TEncodeDistributed(hosts_, addrs, j, paths_[j], xxh_[j], m, fds[j], "secret", gens[j], timeout_s,
                                   Dir("enc", (int)j), &(*stats)[j], writers.empty() ? nullptr : &writers);
      });
    for (auto& t : ts) t.join();
    return st;
  }

  // The whole-group encode of the same data, member by member, into <dir_>/ref/<host>/.
  void Reference(int m) {
    for (size_t j = 0; j < hosts_.size(); j++) {
      fs::create_directories(Dir("ref", (int)j));
      ASSERT_TRUE(TEncodeGroup(hosts_, paths_, m, j, Dir("ref", (int)j)).ok());
    }
  }

  void ExpectSameAsReference() {
    for (size_t j = 0; j < hosts_.size(); j++)
      for (const char* f : {"/parity", "/parity.meta"}) {
        const std::string got = Slurp(Dir("enc", (int)j) + f);
        EXPECT_TRUE(got == Slurp(Dir("ref", (int)j) + f)) << hosts_[j] << f << " differs from the whole-group encode's";
        EXPECT_FALSE(fs::exists(Dir("enc", (int)j) + f + std::string(".tmp")));
      }
  }

  // The block size of the group encoded last (any member's parity.meta in enc/ or ref/).
  uint64_t Block() const {
    TParityMeta meta;
    for (size_t j = 0; j < hosts_.size(); j++)
      for (const char* tree : {"enc", "ref"})
        if (TParityMeta::Parse(Slurp(Dir(tree, (int)j) + "/parity.meta"), "meta", &meta).ok()) return meta.block;
    return 0;
  }
  // The images again in paths_/xxh_ from what enc/<host>/ holds (after a rebuild moved them to out/).
  void MakeGroupPaths() {
    for (size_t j = 0; j < hosts_.size(); j++) {
      paths_[j].clear();
      xxh_[j].clear();
      for (const auto& e : fs::directory_iterator(Dir("enc", (int)j))) {
        const std::string n = e.path().filename();
        if (n.rfind("img-", 0) != 0) continue;
        paths_[j].push_back(e.path());
        uint64_t h = 0;
        EXPECT_TRUE(FileXxh3(e.path(), &h).ok());
        xxh_[j].push_back(h);
      }
    }
  }
  static size_t Entries(const std::string& d) {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); ++it) n++;
    return n;
  }

  // Member `lost` (wiped) rebuilt into out/<host>/ by the streamed path: every other member not in
  // `unusable` sends from enc/<host>/, each on its own thread; gens: the survivors' generation, then the
  // rebuilder's. Returns the rebuilder's status (the senders' must agree on success).
  Status Rebuild(int lost, const std::vector<std::string>& unusable, TRebuildStats* stats,
                 std::pair<uint64_t, uint64_t> gens = {0, 0}) {
    int fd = -1;
    uint16_t port = 0;
    EXPECT_TRUE(TlxListen("127.0.0.1", &fd, &port).ok());
    fds_.push_back(fd);
    const std::string addr = "127.0.0.1:" + std::to_string(port);
    std::vector<Status> sent(hosts_.size());
    std::vector<std::thread> ts;
    for (size_t j = 0; j < hosts_.size(); j++) {
      if ((int)j == lost || std::find(unusable.begin(), unusable.end(), hosts_[j]) != unusable.end()) continue;
      ts.emplace_back([&, j] {
        sent[j] = TRebuildSend(addr, "secret", gens.first, hosts_[j], Dir("enc", (int)j), hosts_[(size_t)lost],
                               unusable, 2);
      });
    }
    Status st = TRebuildReceive(fd, "secret", gens.second, hosts_[(size_t)lost], unusable, Dir("out", lost), 2, stats);
    for (auto& t : ts) t.join();
    for (const Status& s : sent)
      if (st.ok()) {
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    EXPECT_TRUE(st.ok() || Entries(Dir("out", lost)) == 0) << "left behind in " << Dir("out", lost);
    return st;
  }

  std::string dir_;
  std::vector<std::string> hosts_;
  std::vector<std::vector<std::string>> paths_;
  std::vector<std::vector<uint64_t>> xxh_;
  std::vector<int> fds_;
};

TEST_F(TEncodeTest, XorOfThreeEqualsTheWholeGroupEncode) {
  MakeGroup(3, {{300000, 5}, {1 << 20}, {77777, 0, 12345}});
  std::vector<TEncodeStats> stats;
  for (const Status& s : Encode(1, {7, 7, 7}, &stats)) ASSERT_TRUE(s.ok()) << s.ToString();
  Reference(1);
  ExpectSameAsReference();
  // XOR: each member receives at most one block per other member: k blocks of B = Lmax / k, about Lmax.
  for (const auto& s : stats) EXPECT_LE(s.received, (1u << 20) + 2 * 64u);
}

// g=4, m=2 (Reed-Solomon), images over several of the exchange's 1 MiB pieces, one member without images;
// then two members lost: each rebuilt from the two survivors, byte for byte.
TEST_F(TEncodeTest, ReedSolomonOfFourRebuildsTwoLostMembers) {
  MakeGroup(4, {{3500000, 1000}, {}, {2000000}, {123, 4567890}});
  std::vector<TEncodeStats> stats;
  for (const Status& s : Encode(2, {3, 3, 3, 3}, &stats)) ASSERT_TRUE(s.ok()) << s.ToString();
  Reference(2);
  ExpectSameAsReference();
  const uint64_t lmax = 123 + 4567890, total = 3501000 + 2000000 + 123 + 4567890;
  uint64_t sent = 0, received = 0;
  for (const auto& s : stats) {
    EXPECT_LE(s.received, 2 * (lmax + 2 * 64));  // m x Lmax, where the all-to-all exchange moved (g - 1) x D
    sent += s.sent;
    received += s.received;
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent, 2 * total);  // every real byte to the m holders of its stripe, no padding on the wire
  // Members 1 (the one without images) and 3 lost.
  std::map<std::string, std::string> before;  // the lost members' images, by path
  for (int lost : {1, 3})
    for (const std::string& p : paths_[(size_t)lost]) before[p] = Slurp(p);
  for (int lost : {1, 3}) fs::remove_all(Dir("enc", lost));
  for (int lost : {1, 3}) {
    TRebuildStats got;
    ASSERT_TRUE(Rebuild(lost, {hosts_[1], hosts_[3]}, &got).ok());
    const std::string out = Dir("out", lost);
    for (const std::string& p : paths_[(size_t)lost])
      EXPECT_TRUE(Slurp(out + p.substr(p.find_last_of('/'))) == before[p]) << p << " rebuilt differs";
    for (const char* f : {"/parity", "/parity.meta"})
      EXPECT_TRUE(Slurp(out + f) == Slurp(Dir("ref", lost) + f)) << hosts_[(size_t)lost] << f;
    // Two survivors = k: every block of each needed stripe, but no more than 4 stripes x k blocks of B.
    EXPECT_EQ(got.sources, 2);
    EXPECT_LE(got.received, 4 * 2 * Block());
    EXPECT_EQ(Entries(out), (lost == 1 ? 2u : 4u));  // images, parity, parity.meta: no temporary left
  }
}

// XOR over 3, one member wiped: rebuilt through the streamed path from the two survivors, byte for byte, its
// parity too; the survivors send only the stripes' real bytes (Lmax-ish per needed stripe, not their images
// and parity whole). Then the parity of two members lost: encoded again by the group with only those two
// writing (the third sends), byte for byte the checkpoint's.
TEST_F(TEncodeTest, XorRebuildAndEncodeAgainThroughTheStreams) {
  MakeGroup(3, {{2500000, 7}, {3000000}, {10, 1200000, 0}});
  std::vector<TEncodeStats> stats;
  for (const Status& s : Encode(1, {4, 4, 4}, &stats)) ASSERT_TRUE(s.ok()) << s.ToString();
  Reference(1);
  std::map<std::string, std::string> before;
  for (const std::string& p : paths_[2]) before[p] = Slurp(p);
  fs::remove_all(Dir("enc", 2));
  TRebuildStats got;
  ASSERT_TRUE(Rebuild(2, {}, &got).ok());
  for (const std::string& p : paths_[2])
    EXPECT_TRUE(Slurp(Dir("out", 2) + p.substr(p.find_last_of('/'))) == before[p]) << p << " rebuilt differs";
  for (const char* f : {"/parity", "/parity.meta"}) EXPECT_TRUE(Slurp(Dir("out", 2) + f) == Slurp(Dir("ref", 2) + f)) << f;
  // 3 stripes of k = 2 blocks: at most 6 B, where gathering moved both survivors' images and parity.
  const uint64_t gathered = 2500007 + 3000000 + 2 * Block();
  EXPECT_LE(got.received, 6 * Block());
  EXPECT_LT(got.received, gathered);
  EXPECT_EQ(got.sources, 2);
  // Parity of members 0 and 1 lost: the group encodes again, only they write.
  for (int j : {0, 1}) fs::remove(Dir("enc", j) + "/parity");
  for (int j : {0, 1}) fs::remove(Dir("enc", j) + "/parity.meta");
  fs::rename(Dir("out", 2), Dir("enc", 2));  // the rebuilt member serves the encode
  const std::string parity2 = Slurp(Dir("enc", 2) + "/parity");
  MakeGroupPaths();
  for (const Status& s : Encode(1, {4, 4, 4}, &stats, 10, {true, true, false})) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int j : {0, 1})
    for (const char* f : {"/parity", "/parity.meta"}) EXPECT_TRUE(Slurp(Dir("enc", j) + f) == Slurp(Dir("ref", j) + f)) << j << f;
  EXPECT_TRUE(Slurp(Dir("enc", 2) + "/parity") == parity2);  // a member that does not write keeps its own
  EXPECT_EQ(stats[2].received, 0u);
  EXPECT_EQ(stats[0].sent + stats[1].sent + stats[2].sent, stats[0].received + stats[1].received);
}

// A survivor of another generation, and a group that lost more than its parity tolerates, are refused by
// name; nothing is left in the destination.
TEST_F(TEncodeTest, RebuildRefusesAnotherGenerationAndTooManyLost) {
  MakeGroup(3, {{5000}, {6000}, {7000}});
  std::vector<TEncodeStats> stats;
  for (const Status& s : Encode(1, {2, 2, 2}, &stats)) ASSERT_TRUE(s.ok()) << s.ToString();
  fs::remove_all(Dir("enc", 1));
  TRebuildStats got;
  Status s = Rebuild(1, {}, &got, {2, 3});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("parity group member h"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("sends generation 2, expected 3"), std::string::npos) << s.ToString();
  // The survivor sees it before connecting (the rebuilder learns the group from the survivors).
  s = TRebuildSend("127.0.0.1:1", "secret", 2, hosts_[2], Dir("enc", 2), hosts_[1], {hosts_[0]}, 2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("lost 2 members, its parity tolerates 1"), std::string::npos) << s.ToString();
  EXPECT_EQ(Entries(Dir("out", 1)), 0u);
}

TEST_F(TEncodeTest, AMemberOfAnotherGenerationFailsTheGroupNamingIt) {
  MakeGroup(3, {{1000}, {2000}, {3000}});
  std::vector<TEncodeStats> stats;
  std::vector<Status> st = Encode(1, {5, 5, 6}, &stats, 2);
  for (const Status& s : st) EXPECT_FALSE(s.ok());
  EXPECT_NE(st[0].ToString().find("generation 6, expected 5"), std::string::npos) << st[0].ToString();
  for (int j = 0; j < 3; j++) EXPECT_FALSE(fs::exists(Dir("enc", j) + "/parity.meta"));
}

}  // namespace
}  // namespace revive::coord
