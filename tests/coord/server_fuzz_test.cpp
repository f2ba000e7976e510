// Randomized frames against a live coordinator: authenticated peers (process and CLI roles) send mutated
// versions of every message type, during idle time and during checkpoints. Whatever they send, the
// coordinator must keep serving a well-behaved process: its checkpoints still complete. Runs under ASan/
// UBSan in the sanitizer build (label san), so a bad read or write in any handler fails the test.
#include <map>
#include <random>

#include "coord/manifest.h"
#include "coord_test_util.h"

namespace revive::coord::testing {
namespace {

std::vector<uint8_t> RandomFrame(std::mt19937_64& rng) {
  static const uint16_t kTypes[] = {kHello, kChallenge, kWelcome, kError, kCkptRequest, kCkptDone, kPhase,
                                    kPhaseDone, kPublish, kLookup, kValue, kStatusRequest, kStatus, kKill,
                                    kBye};
  static const char* const kKeys[] = {"role", "pid", "proof", "upid", "restart", "name", "ok", "error", "image",
                                      "bytes", "key", "value", "wait", "status", "n", "p.0.upid", "p.0.image",
                                      "generation", "dir", "barrier"};
  static const char* const kValues[] = {"", "0", "1", "-1", "proc", "cli", "sub", "write", "resume", "suspend",
                                        "18446744073709551615", "/etc/passwd", "../../x", "é", "9999999"};
  // Mostly frames that pass validation (required fields present, random values), so the handlers behind
  // the decoder get exercised, not only the decoder.
  static const std::map<uint16_t, std::vector<const char*>> kRequired = {
      {kHello, {"role", "pid", "proof"}}, {kChallenge, {"nonce"}}, {kWelcome, {"upid"}}, {kError, {"reason"}},
      {kCkptDone, {"ok", "generation"}}, {kPhase, {"name", "generation"}}, {kPhaseDone, {"name", "ok"}},
      {kPublish, {"key", "value"}}, {kLookup, {"key"}}, {kValue, {"key", "found"}},
      {kStatus, {"procs", "generation", "state"}}, {kBye, {"status"}}};
  uint8_t buf[4096];
  uint16_t type = kTypes[rng() % 15];
  FrameBuilder b(buf, sizeof buf, type, (uint32_t)rng());
  std::set<std::string> used;
  auto req = kRequired.find(type);
  if (req != kRequired.end())
    for (const char* k : req->second) {
      used.insert(k);
      b.add(k, kValues[rng() % 15]);
    }
  int fields = (int)(rng() % 4);
  for (int i = 0; i < fields; i++) {
    const char* k = kKeys[rng() % 20];
    if (!used.insert(k).second) continue;
    b.add(k, kValues[rng() % 15]);
  }
  size_t n = b.finish();
  std::vector<uint8_t> f(buf, buf + n);
  if (rng() % 3 == 0 && !f.empty()) {  // and sometimes break it
    switch (rng() % 4) {
      case 0: f[rng() % f.size()] ^= (uint8_t)(1u << (rng() % 8)); break;
      case 1: f.resize(rng() % f.size()); break;
      case 2: f.insert(f.end(), f.begin(), f.end()); break;
      case 3: f.push_back((uint8_t)rng()); break;
    }
  }
  return f;
}

TEST(CoordFuzz, RandomFramesFromAuthenticatedPeers) {
  TempDir dir;
  ServerOptions o;
  o.port = 0;
  o.ckpt_dir = dir.path;
  o.phase_timeout = 2;
  TestServer server(o);
  ASSERT_TRUE(server.Start().ok());
  std::string secret = dir.path + "/.revive-secret";
  FakeProc good(server.port(), secret, "good");
  ASSERT_TRUE(good.connected());
  std::mt19937_64 rng(42);
  int completed = 0;
  for (int round = 0; round < 80; round++) {
    // A burst of hostile peers, each sending a handful of random frames, then vanishing.
    for (int peer = 0; peer < 8; peer++) {
      Client c;
      ClientOptions co = Opts(server.port(), secret, rng() % 2 ? "proc" : "cli", "fuzz");
      ASSERT_TRUE(c.connect(co, nullptr)) << c.error();
      for (int k = 0; k < 4; k++) {
        std::vector<uint8_t> f = RandomFrame(rng);
        if (!c.send(f.data(), f.size())) break;  // dropped by the coordinator: fine
      }
      c.close();
    }
    // The well-behaved process still gets checkpointed (or the generation fails cleanly, e.g. when a
    // fuzz peer that joined as a process vanished mid-checkpoint), and the coordinator answers.
    Cli cli(server.port(), secret);
    ASSERT_TRUE(cli.ok()) << cli.error();
    FrameHeader h;
    Payload p;
    ASSERT_TRUE(cli.Call(kCkptRequest, {}, &h, &p, 30000)) << "round " << round << ": " << cli.error();
    ASSERT_EQ(h.type, kCkptDone);
    if (Str(p, "ok") == "1") completed++;
  }
  EXPECT_GT(completed, 40) << "too few checkpoints completed among hostile peers";
  ASSERT_FALSE(good.gone());
}

}  // namespace
}  // namespace revive::coord::testing
