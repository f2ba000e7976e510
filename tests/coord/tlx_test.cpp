// The host-to-host image transfer of transparent multi-level storage (coord/tlx.h): files arrive whole,
// under their names, with their checksums; a sender without the computation's secret, one claiming another
// host or generation, and a sender that disappears mid-file are refused and leave no file under a final name.
#include "coord/tlx.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "coord/sha256.h"
#include "coord/tlevels.h"

namespace revive::coord {
namespace {

class TlxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/tlx_test-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_ + "/src");
    for (int k = 0; k < 2; k++) {
      std::string p = dir_ + "/src/img-" + std::to_string(k) + ".rimg";
      std::ofstream(p) << std::string(300000 + k * 7, char('a' + k)) << "end" << k;
      src_.push_back(p);
    }
    ASSERT_TRUE(TlxListen("127.0.0.1", &fd_, &port_).ok());
  }
  void TearDown() override {
    close(fd_);
    std::filesystem::remove_all(dir_);
  }
  // Sends src_ as (secret, gen, host) while receiving as (kSecret, 7, "h1") into dir_/dst.
  void Transfer(const std::string& secret, uint64_t gen, const std::string& host, Status* sent, Status* got) {
    std::vector<TlxFile> files, recv;
    std::thread t([&] { *sent = TlxSend("127.0.0.1:" + std::to_string(port_), secret, gen, host, src_, &files, 10); });
    *got = TlxReceive(fd_, kSecret, 7, "h1", dir_ + "/dst", 10, &recv);
    t.join();
    if (got->ok()) {
      ASSERT_EQ(recv.size(), src_.size());
      for (size_t i = 0; i < src_.size(); i++) {
        uint64_t h = 0;
        ASSERT_TRUE(FileXxh3(src_[i], &h).ok());
        EXPECT_EQ(recv[i].xxh3, h);
        EXPECT_EQ(files[i].xxh3, h);
      }
    }
  }
  bool NoFinalFiles() { return !std::filesystem::exists(dir_ + "/dst/img-0.rimg") && !std::filesystem::exists(dir_ + "/dst/img-1.rimg"); }

  const std::string kSecret = std::string(32, 'k');
  std::string dir_;
  std::vector<std::string> src_;
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST_F(TlxTest, FilesArriveWholeWithTheirChecksums) {
  Status sent, got;
  Transfer(kSecret, 7, "h1", &sent, &got);
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  ASSERT_TRUE(got.ok()) << got.ToString();
  for (int k = 0; k < 2; k++) {
    std::ifstream a(src_[k]), b(dir_ + "/dst/img-" + std::to_string(k) + ".rimg");
    std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_EQ(sa, sb);
  }
}

TEST_F(TlxTest, WrongSecretRefused) {
  Status sent, got;
  Transfer(std::string(32, 'x'), 7, "h1", &sent, &got);
  EXPECT_FALSE(got.ok());
  EXPECT_NE(got.ToString().find("does not hold the computation's secret"), std::string::npos) << got.ToString();
  EXPECT_FALSE(sent.ok());
  EXPECT_TRUE(NoFinalFiles());
}

TEST_F(TlxTest, OtherHostOrGenerationRefused) {
  Status sent, got;
  Transfer(kSecret, 7, "h2", &sent, &got);
  EXPECT_NE(got.ToString().find("says it is host h2, expected h1"), std::string::npos) << got.ToString();
  EXPECT_TRUE(NoFinalFiles());
  Transfer(kSecret, 6, "h1", &sent, &got);
  EXPECT_NE(got.ToString().find("generation 6, expected 7"), std::string::npos) << got.ToString();
  EXPECT_TRUE(NoFinalFiles());
}

TEST_F(TlxTest, HostNameThatIsAPathRefused) {
  // With any sender accepted ("" expected) the host name becomes a directory: it may not climb out.
  std::vector<TlxFile> files, recv;
  Status sent;
  std::thread t([&] { sent = TlxSend("127.0.0.1:" + std::to_string(port_), kSecret, 7, "../x", src_, &files, 10); });
  Status got = TlxReceive(fd_, kSecret, 7, "", dir_ + "/in-{from}", 10, &recv);
  t.join();
  EXPECT_NE(got.ToString().find("bad host name"), std::string::npos) << got.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/in-../x"));
}

TEST_F(TlxTest, SenderGoneMidFileLeavesNoFile) {
  // A sender that proves the secret, announces a file and dies after half of it.
  std::thread t([&] {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(s, (sockaddr*)&a, sizeof a), 0);
    uint8_t nonce[32], mac[32];
    ASSERT_EQ(read(s, nonce, 32), 32);
    hmac_sha256(kSecret.data(), kSecret.size(), nonce, 32, mac);
    std::string head = "tlx 1 7 h1 1\nimg-0.rimg 1000\n" + std::string(500, 'z');
    ASSERT_EQ(write(s, mac, 32), 32);
    ASSERT_EQ(write(s, head.data(), head.size()), (ssize_t)head.size());
    close(s);
  });
  std::vector<TlxFile> recv;
  Status got = TlxReceive(fd_, kSecret, 7, "h1", dir_ + "/dst", 10, &recv);
  t.join();
  EXPECT_FALSE(got.ok());
  EXPECT_TRUE(NoFinalFiles());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dst/.img-0.rimg.tmp"));
}

}  // namespace
}  // namespace revive::coord
