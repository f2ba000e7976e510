// 128 processes on one flat coordinator: every one connects, a checkpoint round completes with all 128
// images in the manifest, and the round's time is printed (performance is measured in bench/coord, not
// asserted here).
#include <chrono>

#include "coord/manifest.h"
#include "coord_test_util.h"

namespace revive::coord::testing {
namespace {

TEST(CoordScale, CheckpointRoundWith128Processes) {
  TempDir dir;
  ServerOptions o;
  o.port = 0;
  o.ckpt_dir = dir.path;
  TestServer server(o);
  ASSERT_TRUE(server.Start().ok());
  std::string secret = dir.path + "/.revive-secret";
  constexpr int kProcs = 128;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<FakeProc>> procs;
  for (int i = 0; i < kProcs; i++) {
    procs.push_back(std::make_unique<FakeProc>(server.port(), secret, "p"));
    ASSERT_TRUE(procs.back()->connected()) << i << ": " << procs.back()->error();
  }
  auto t1 = std::chrono::steady_clock::now();
  Cli cli(server.port(), secret);
  ASSERT_TRUE(cli.ok()) << cli.error();
  for (int round = 1; round <= 3; round++) {
    FrameHeader h;
    Payload p;
    auto c0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(cli.Call(kCkptRequest, {}, &h, &p)) << cli.error();
    auto c1 = std::chrono::steady_clock::now();
    ASSERT_EQ(Str(p, "ok"), "1") << Str(p, "error");
    EXPECT_EQ(Str(p, "images"), std::to_string(kProcs));
    Manifest m;
    ASSERT_TRUE(ReadManifest(Env::Default(), GenerationDir(dir.path, round) + "/MANIFEST.json", &m).ok());
    EXPECT_EQ(m.procs.size(), (size_t)kProcs);
    printf("round %d: %d processes checkpointed in %.2f ms (coordinator says %s s)\n", round, kProcs,
           std::chrono::duration<double, std::milli>(c1 - c0).count(), Str(p, "seconds").c_str());
  }
  FrameHeader h;
  Payload p;
  ASSERT_TRUE(cli.Call(kStatusRequest, {}, &h, &p)) << cli.error();
  EXPECT_EQ(Str(p, "procs"), std::to_string(kProcs));
  EXPECT_TRUE(p.has(("p." + std::to_string(kProcs - 1) + ".upid").c_str()));
  EXPECT_FALSE(p.has("truncated"));
  printf("%d processes connected in %.2f ms\n", kProcs, std::chrono::duration<double, std::milli>(t1 - t0).count());
  std::set<uint64_t> upids;
  for (auto& p : procs) {
    ASSERT_TRUE(p->WaitSeen(12));
    EXPECT_EQ(p->Seen().size(), 12u);
    upids.insert(p->upid());
  }
  EXPECT_EQ(upids.size(), (size_t)kProcs);
}

}  // namespace
}  // namespace revive::coord::testing
