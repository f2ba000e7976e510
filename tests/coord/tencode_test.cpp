// The distributed L3 encode (coord/tencode.h): members on real sockets, one thread each, write byte for
// byte the parity and parity.meta that TEncodeGroup computes from the whole group's data, receive about
// m x Lmax bytes each (not (g - 1) x D), and the rebuild (TRebuildMember) restores members wiped after it.
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
                             double timeout_s = 10) {
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
                                   Dir("enc", (int)j), &(*stats)[j]);
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
    const std::string out = Dir("out", lost);
    Status s = TRebuildMember(dir_ + "/enc", hosts_[(size_t)lost], out);
    ASSERT_TRUE(s.ok()) << hosts_[(size_t)lost] << ": " << s.ToString();
    for (const std::string& p : paths_[(size_t)lost])
      EXPECT_TRUE(Slurp(out + p.substr(p.find_last_of('/'))) == before[p]) << p << " rebuilt differs";
    EXPECT_TRUE(Slurp(out + "/parity") == Slurp(Dir("ref", lost) + "/parity")) << hosts_[(size_t)lost] << " parity";
  }
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
