// The coordinator with real sockets: authentication, bad peers, checkpoint barriers (including failing and
// vanishing processes), restart barrier, pub/sub, status, kill, exit-on-last, intervals, phase timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>

#include "coord/manifest.h"
#include "coord/tlevels.h"
#include "coord_test_util.h"

namespace revive::coord::testing {
namespace {

// The pid of a process that has exited and been reaped: gone, as a killed rank's pid is.
pid_t DeadPid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  if (p < 0 || waitpid(p, nullptr, 0) != p) return -1;
  return p;
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions o = {}) {
    o.port = 0;
    o.ckpt_dir = dir_.path;
    server_ = std::make_unique<TestServer>(o);
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    port_ = server_->port();
    secret_ = dir_.path + "/.revive-secret";
  }
  Manifest ReadGen(uint64_t g) {
    Manifest m;
    Status s = ReadManifest(Env::Default(), GenerationDir(dir_.path, g) + "/MANIFEST.json", &m);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return m;
  }
  // Requests a checkpoint and returns the CKPT_DONE payload as a map.
  std::map<std::string, std::string> Checkpoint() {
    Cli cli(port_, secret_);
    EXPECT_TRUE(cli.ok()) << cli.error();
    FrameHeader h;
    Payload p;
    std::map<std::string, std::string> out;
    if (!cli.Call(kCkptRequest, {}, &h, &p)) {
      ADD_FAILURE() << cli.error();
      return out;
    }
    EXPECT_EQ(h.type, kCkptDone);
    size_t pos = 0;
    Field f;
    while (p.next(&pos, &f)) out[std::string(f.key, f.key_len)] = std::string(f.value, f.value_len);
    return out;
  }
  // Processes "a" and "b" (upids *u1, *u2) checkpointed as generation 1; then the computation dies and
  // a new coordinator (options o) serves the restart.
  void CheckpointTwoThenNewServer(uint64_t* u1, uint64_t* u2, ServerOptions o = {}) {
    StartServer();
    {
      FakeProc a(port_, secret_, "a"), b(port_, secret_, "b");
      *u1 = a.upid();
      *u2 = b.upid();
      auto done = Checkpoint();
      ASSERT_EQ(done["ok"], "1") << done["error"];
    }
    server_.reset();
    StartServer(o);
  }
  bool StillServing() {
    Cli cli(port_, secret_);
    FrameHeader h;
    Payload p;
    return cli.ok() && cli.Call(kStatusRequest, {}, &h, &p) && h.type == kStatus;
  }
  // A raw TCP connection (no client library) for sending garbage.
  int RawConnect() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(0, connect(fd, (sockaddr*)&a, sizeof a));
    return fd;
  }
  // True if the coordinator closes fd within `seconds` (reads and discards until EOF).
  bool ClosedByPeer(int fd, double seconds = 5) {
    char buf[4096];
    for (int i = 0; i < seconds * 10; i++) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) == 1) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0) return true;
      }
    }
    return false;
  }

  TempDir dir_;
  std::unique_ptr<TestServer> server_;
  uint16_t port_ = 0;
  std::string secret_;
};

TEST_F(ServerTest, SecretCreatedPrivate) {
  StartServer();
  struct stat st;
  ASSERT_EQ(0, stat(secret_.c_str(), &st));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
}

TEST_F(ServerTest, ClientWithoutSecretIsRefused) {
  StartServer();
  std::string wrong = dir_.path + "/wrong-secret";
  std::ofstream(wrong) << "not the secret";
  Client c;
  ClientOptions o = Opts(port_, wrong);
  EXPECT_FALSE(c.connect(o, nullptr));
  EXPECT_NE(std::string(c.error()).find("authentication failed"), std::string::npos) << c.error();
  // HELLO without any proof is a protocol error (missing field): refused as well.
  int fd = RawConnect();
  uint8_t buf[256];
  FrameBuilder b(buf, sizeof buf, kHello, 1);
  b.add("role", "proc").add("pid", "1");
  size_t n = b.finish();
  ASSERT_EQ((ssize_t)n, write(fd, buf, n));
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  // A proof of the right length but wrong value.
  fd = RawConnect();
  FrameBuilder b2(buf, sizeof buf, kHello, 1);
  b2.add("role", "cli").add("pid", "1").add("proof", std::string(64, '0').c_str());
  n = b2.finish();
  ASSERT_EQ((ssize_t)n, write(fd, buf, n));
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_TRUE(StillServing());
}

TEST_F(ServerTest, BadFramesDropOnlyThatConnection) {
  StartServer();
  FakeProc good(port_, secret_, "good");
  ASSERT_TRUE(good.connected()) << good.error();
  std::vector<std::string> attacks = {
      std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),  // bad magic
      std::string(100000, '\xff'),                         // garbage
  };
  // Oversized: header announcing 1 MiB + 1 (refused from the header, before reading it).
  uint8_t hdr[kHeaderSize];
  encode_header(FrameHeader{kHello, 0, kMaxPayload + 1, 0}, hdr);
  attacks.emplace_back((const char*)hdr, kHeaderSize);
  // Larger than the pre-authentication limit.
  encode_header(FrameHeader{kHello, 0, 8192, 0}, hdr);
  attacks.emplace_back(std::string((const char*)hdr, kHeaderSize) + std::string(8192, 'a'));
  // Malformed payload (line without '=').
  encode_header(FrameHeader{kHello, 0, 6, 0}, hdr);
  attacks.emplace_back(std::string((const char*)hdr, kHeaderSize) + "hello\n");
  // A valid frame type sent before HELLO.
  encode_header(FrameHeader{kCkptRequest, 0, 0, 0}, hdr);
  attacks.emplace_back((const char*)hdr, kHeaderSize);
  for (const auto& a : attacks) {
    int fd = RawConnect();
    (void)!write(fd, a.data(), a.size());
    EXPECT_TRUE(ClosedByPeer(fd)) << "attack of " << a.size() << " bytes left the connection open";
    close(fd);
    EXPECT_TRUE(StillServing());
  }
  // Truncated: half a header, then the peer goes away.
  int fd = RawConnect();
  (void)!write(fd, hdr, 7);
  close(fd);
  // Truncated payload, peer stays: the others are still served meanwhile.
  fd = RawConnect();
  encode_header(FrameHeader{kHello, 0, 100, 0}, hdr);
  (void)!write(fd, hdr, kHeaderSize);
  (void)!write(fd, "role=proc\n", 10);
  EXPECT_TRUE(StillServing());
  auto done = Checkpoint();  // a barrier still works with the good process
  EXPECT_EQ(done["ok"], "1") << done["error"];
  close(fd);
  // A protocol error from an authenticated process fails nothing else: it is simply dropped.
  EXPECT_TRUE(StillServing());
}

TEST_F(ServerTest, CheckpointBarrierAllPhasesInOrder) {
  StartServer();
  std::vector<std::unique_ptr<FakeProc>> procs;
  for (int i = 0; i < 4; i++) {
    procs.push_back(std::make_unique<FakeProc>(port_, secret_, "app"));
    ASSERT_TRUE(procs.back()->connected()) << procs.back()->error();
  }
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "1");
  EXPECT_EQ(done["images"], "4");
  EXPECT_EQ(done["dir"], dir_.path + "/ckpt-1");
  Manifest m = ReadGen(1);
  EXPECT_EQ(m.generation, 1u);
  ASSERT_EQ(m.procs.size(), 4u);
  for (size_t i = 0; i < 4; i++) {
    EXPECT_EQ(m.procs[i].prog, "app");
    EXPECT_EQ(m.procs[i].pid, (uint64_t)getpid());
    EXPECT_EQ(m.procs[i].image, "app-" + std::to_string(m.procs[i].upid) + ".rimg");
    EXPECT_TRUE(Exists(dir_.path + "/ckpt-1/" + m.procs[i].image));
    EXPECT_GT(m.procs[i].bytes, 0u);
  }
  for (auto& p : procs) {
    ASSERT_TRUE(p->WaitSeen(4));
    EXPECT_EQ(p->Seen(), (std::vector<std::string>{"suspend", "drain", "write", "resume:1"}));
  }
  // Second generation gets the next number; upids are distinct.
  done = Checkpoint();
  EXPECT_EQ(done["generation"], "2");
  std::set<uint64_t> upids;
  for (auto& p : procs) upids.insert(p->upid());
  EXPECT_EQ(upids.size(), 4u);
}

TEST_F(ServerTest, FailingProcessFailsTheGeneration) {
  StartServer();
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b"), c(port_, secret_, "c");
  b.ActAt("write", FakeProc::Act::kFail);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("upid " + std::to_string(b.upid())), std::string::npos) << done["error"];
  EXPECT_NE(done["error"].find("disk full (simulated)"), std::string::npos) << done["error"];
  EXPECT_FALSE(Exists(dir_.path + "/ckpt-1/MANIFEST.json"));
  // Everybody, including the failing one, is resumed with ok=0.
  for (FakeProc* p : {&a, &b, &c}) {
    ASSERT_TRUE(p->WaitSeen(4));
    EXPECT_EQ(p->Seen().back(), "resume:0");
  }
  // The next generation succeeds and is numbered above the failed one.
  b.ActAt("", FakeProc::Act::kOk);
  done = Checkpoint();
  EXPECT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "2");
  EXPECT_EQ(ReadGen(2).procs.size(), 3u);
}

TEST_F(ServerTest, DisconnectMidCheckpointFailsAndSurvivorsResume) {
  StartServer();
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b"), c(port_, secret_, "c");
  b.ActAt("drain", FakeProc::Act::kDisconnect);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("disconnected"), std::string::npos) << done["error"];
  EXPECT_NE(done["error"].find("drain"), std::string::npos) << done["error"];
  EXPECT_FALSE(Exists(dir_.path + "/ckpt-1/MANIFEST.json"));
  for (FakeProc* p : {&a, &c}) {
    ASSERT_TRUE(p->WaitSeen(3));
    EXPECT_EQ(p->Seen(), (std::vector<std::string>{"suspend", "drain", "resume:0"}));
  }
  done = Checkpoint();
  EXPECT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(ReadGen(2).procs.size(), 2u);
}

// A process that leaves before it was suspended and is gone (exited, reaped) is simply not in the
// generation; one whose process still runs (its connection broke) makes the coordinator take the
// generation again, under the same number, without it.
TEST_F(ServerTest, ProcessLeavingBeforeSuspendIsLeftOutOrTakenAgain) {
  StartServer();
  pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  pid_t alive = fork();
  if (alive == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(alive, 0);
  {
    FakeProc a(port_, secret_, "a"), b(port_, secret_, "b", false, 0, uint64_t(dead));
    b.ActAt("suspend", FakeProc::Act::kDisconnect);
    auto done = Checkpoint();
    ASSERT_EQ(done["ok"], "1") << done["error"];
    EXPECT_EQ(done["images"], "1");
    ASSERT_TRUE(a.WaitSeen(4));
    EXPECT_EQ(a.Seen(), (std::vector<std::string>{"suspend", "drain", "write", "resume:1"}));
  }
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b", false, 0, uint64_t(alive));
  b.ActAt("suspend", FakeProc::Act::kDisconnect);
  auto done = Checkpoint();
  kill(alive, SIGKILL);
  waitpid(alive, nullptr, 0);
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "2");
  ASSERT_TRUE(a.WaitSeen(6));
  EXPECT_EQ(a.Seen(), (std::vector<std::string>{"suspend", "resume:0", "suspend", "drain", "write", "resume:1"}));
  Manifest m = ReadGen(2);
  for (const auto& p : m.procs) EXPECT_NE(p.upid, b.upid());
}

// A refusal for now (a fork in flight) is taken again; the images of the failed attempt do not linger.
TEST_F(ServerTest, RefusalForNowIsTakenAgain) {
  StartServer();
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b");
  b.ActAt("write", FakeProc::Act::kRefuseOnce);
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "1");
  EXPECT_EQ(ReadGen(1).procs.size(), 2u);
  ASSERT_TRUE(a.WaitSeen(8));
  EXPECT_EQ(a.Seen(), (std::vector<std::string>{"suspend", "drain", "write", "resume:0", "suspend", "drain", "write",
                                                "resume:1"}));
  done = Checkpoint();
  EXPECT_EQ(done["generation"], "2");
}

// A refusal that never ends fails in the end, saying how often the generation was taken; a real failure
// in the same attempt is not retried at all.
TEST_F(ServerTest, EndlessRefusalFailsAfterRetriesAndRealFailureAtOnce) {
  StartServer();
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b");
  b.ActAt("write", FakeProc::Act::kRefuse);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("refused for now"), std::string::npos) << done["error"];
  EXPECT_NE(done["error"].find("taken 13 times"), std::string::npos) << done["error"];
  EXPECT_FALSE(Exists(dir_.path + "/ckpt-1/MANIFEST.json"));
  b.ActAt("", FakeProc::Act::kOk);
  a.ActAt("write", FakeProc::Act::kFail);
  size_t before = b.Seen().size();
  done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("disk full"), std::string::npos) << done["error"];
  ASSERT_TRUE(b.WaitSeen(before + 4));
  EXPECT_EQ(b.Seen().size(), before + 4) << "a real failure is not retried";
}

// --fork: a process that exits after it resumed reports its image first and is in the generation; one
// that vanishes without a report makes the coordinator take the generation again without it.
TEST_F(ServerTest, ForkExitAfterResumeReportsEarlyOrIsTakenAgain) {
  ServerOptions o;
  o.fork = true;
  StartServer(o);
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b"), c(port_, secret_, "c");
  b.ActAt("resume", FakeProc::Act::kExitAfterResume);
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "3");
  EXPECT_EQ(ReadGen(1).procs.size(), 3u);
  ASSERT_TRUE(a.WaitSeen(5));
  EXPECT_EQ(a.Seen(), (std::vector<std::string>{"suspend", "drain", "write", "resume:1", "durable"}));
  c.ActAt("resume", FakeProc::Act::kVanishAfterResume);
  done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "2");
  Manifest m = ReadGen(2);
  ASSERT_EQ(m.procs.size(), 1u);
  EXPECT_EQ(m.procs[0].upid, a.upid());
}

TEST_F(ServerTest, SilentProcessTimesOut) {
  ServerOptions o;
  o.phase_timeout = 1;
  StartServer(o);
  FakeProc a(port_, secret_, "a"), b(port_, secret_, "b");
  b.ActAt("write", FakeProc::Act::kHang);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("did not answer phase write"), std::string::npos) << done["error"];
  ASSERT_TRUE(a.WaitSeen(4));
  EXPECT_EQ(a.Seen().back(), "resume:0");
  // b was dropped but may still run: no later generation may be published without it.
  auto next = Checkpoint();
  EXPECT_EQ(next["ok"], "0");
  EXPECT_NE(next["error"].find("refused"), std::string::npos) << next["error"];
  EXPECT_NE(next["error"].find("(b, pid"), std::string::npos) << next["error"];
  EXPECT_NE(next["error"].find("did not answer phase write"), std::string::npos) << next["error"];
}

// An MPI rank that ends without exit() (killed or crashed: no BYE) ends its job: a generation taken
// now would save a job that cannot finish, and would be the newest one a restart takes. Later
// checkpoints are refused naming the rank; a rank that said BYE (exit), a vanished process that is not
// a rank, or one that carries a live rank's number (a helper it started) changes nothing. One that dies while being suspended fails its generation for good.
TEST_F(ServerTest, DeadMpiRankRefusesLaterCheckpoints) {
  StartServer();
  pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  FakeProc a(port_, secret_, "a");
  { FakeProc plain(port_, secret_, "plain", false, 0, uint64_t(dead)); }
  {
    FakeProc r0(port_, secret_, "ring", false, 0, uint64_t(dead), "0");
    r0.Bye(0);
  }
  usleep(200000);
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "1");

  FakeProc r2(port_, secret_, "ring", false, 0, uint64_t(dead), "2");
  // A helper the rank started (its environment names rank 2 too) killed while rank 2 lives: not the rank.
  pid_t helper_pid = DeadPid();
  ASSERT_GT(helper_pid, 0);
  ASSERT_NE(helper_pid, dead);
  { FakeProc helper(port_, secret_, "sh", false, 0, uint64_t(helper_pid), "2"); }
  usleep(200000);
  done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "2");
  r2.ActAt("suspend", FakeProc::Act::kDisconnect);
  done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("MPI rank 2, process upid"), std::string::npos) << done["error"];
  EXPECT_NE(done["error"].find("ended without exit()"), std::string::npos) << done["error"];
  done = Checkpoint();  // and from now on
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("checkpoints of this job are refused: MPI rank 2"), std::string::npos)
      << done["error"];
  EXPECT_NE(done["error"].find("(ring, pid " + std::to_string(dead)), std::string::npos) << done["error"];
  EXPECT_FALSE(std::ifstream(GenerationDir(dir_.path, 3) + "/MANIFEST.json").good());
}

// Killed between checkpoints: the next one is refused.
TEST_F(ServerTest, MpiRankKilledBetweenCheckpointsRefusesTheNext) {
  StartServer();
  pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  FakeProc a(port_, secret_, "mpiexec");
  { FakeProc r1(port_, secret_, "ring", false, 0, uint64_t(dead), "1"); }
  usleep(200000);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("refused: MPI rank 1, process upid"), std::string::npos) << done["error"];
}

TEST_F(ServerTest, NoProcessesIsAClearError) {
  StartServer();
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("no processes"), std::string::npos);
}

TEST_F(ServerTest, PublishLookupWithWait) {
  StartServer();
  Cli waiter(port_, secret_), pub(port_, secret_);
  ASSERT_TRUE(waiter.ok() && pub.ok());
  FrameHeader h;
  Payload p;
  ASSERT_TRUE(waiter.Call(kLookup, {{"key", "ib.lid.7"}, {"wait", "0"}}, &h, &p));
  EXPECT_EQ(h.type, kValue);
  EXPECT_EQ(Str(p, "found"), "0");
  // wait=1: no answer until someone publishes.
  FrameBuilder b(waiter.client().tx_buffer(), Client::kTxCap, kLookup, 99);
  b.add("key", "ib.lid.7").add("wait", "1");
  ASSERT_TRUE(waiter.client().send(b));
  EXPECT_EQ(0, waiter.client().recv(&h, &p, 300));
  FrameBuilder pb(pub.client().tx_buffer(), Client::kTxCap, kPublish, 1);
  pb.add("key", "ib.lid.7").add("value", "qp=0x1234 lid=7");
  ASSERT_TRUE(pub.client().send(pb));
  ASSERT_EQ(1, waiter.client().recv(&h, &p, 5000)) << waiter.client().error();
  EXPECT_EQ(h.type, kValue);
  EXPECT_EQ(h.seq, 99u);
  EXPECT_EQ(Str(p, "found"), "1");
  EXPECT_EQ(Str(p, "value"), "qp=0x1234 lid=7");
  // And later lookups find it at once.
  ASSERT_TRUE(pub.Call(kLookup, {{"key", "ib.lid.7"}, {"wait", "1"}}, &h, &p));
  EXPECT_EQ(Str(p, "value"), "qp=0x1234 lid=7");
}

// LOOKUP next=1 walks the keys under a prefix in order; keys under "gen.<G>." go when generation G ends.
TEST_F(ServerTest, LookupNextWalksAPrefixAndGenerationKeysAreDropped) {
  StartServer();
  FakeProc proc(port_, secret_, "app");
  ASSERT_TRUE(proc.connected()) << proc.error();
  Cli cli(port_, secret_);
  ASSERT_TRUE(cli.ok());
  for (const char* k : {"gen.1.fdsh.h.5.9.7", "gen.1.fdsh.h.5.9.12", "gen.1.fdsh.h.5.90.1", "keep.me", "gen.10.x"}) {
    FrameBuilder pb(cli.client().tx_buffer(), Client::kTxCap, kPublish, 1);
    pb.add("key", k).add("value", k);
    ASSERT_TRUE(cli.client().send(pb));
  }
  FrameHeader h;
  Payload p;
  const std::string prefix = "gen.1.fdsh.h.5.9.";
  std::vector<std::string> walked;
  std::string at = prefix;
  for (int i = 0; i < 10; i++) {
    ASSERT_TRUE(cli.Call(kLookup, {{"key", at}, {"prefix", prefix}, {"next", "1"}, {"wait", "0"}}, &h, &p));
    ASSERT_EQ(h.type, kValue);
    if (Str(p, "found") != "1") break;
    at = Str(p, "key");
    EXPECT_EQ(Str(p, "value"), at);
    walked.push_back(at);
  }
  // Lexicographic order; "gen.1.fdsh.h.5.90.1" does not start with the prefix.
  EXPECT_EQ(walked, (std::vector<std::string>{"gen.1.fdsh.h.5.9.12", "gen.1.fdsh.h.5.9.7"}));
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  ASSERT_EQ(done["generation"], "1");
  for (auto [k, found] : std::vector<std::pair<std::string, std::string>>{
           {"gen.1.fdsh.h.5.9.7", "0"}, {"gen.1.fdsh.h.5.90.1", "0"}, {"keep.me", "1"}, {"gen.10.x", "1"}}) {
    ASSERT_TRUE(cli.Call(kLookup, {{"key", k}, {"wait", "0"}}, &h, &p));
    EXPECT_EQ(Str(p, "found"), found) << k;
  }
}

TEST_F(ServerTest, StatusListsProcesses) {
  StartServer();
  FakeProc a(port_, secret_, "alpha"), b(port_, secret_, "beta");
  Cli cli(port_, secret_);
  FrameHeader h;
  Payload p;
  ASSERT_TRUE(cli.Call(kStatusRequest, {}, &h, &p));
  EXPECT_EQ(Str(p, "procs"), "2");
  EXPECT_EQ(Str(p, "state"), "idle");
  EXPECT_EQ(Str(p, "generation"), "0");
  std::set<std::string> progs = {Str(p, "p.0.prog"), Str(p, "p.1.prog")};
  EXPECT_EQ(progs, (std::set<std::string>{"alpha", "beta"}));
  EXPECT_EQ(Str(p, "p.0.pid"), std::to_string(getpid()));
}

TEST_F(ServerTest, KillReachesEveryProcess) {
  StartServer();
  FakeProc a(port_, secret_), b(port_, secret_);
  Cli cli(port_, secret_);
  FrameHeader h;
  Payload p;
  ASSERT_TRUE(cli.Call(kKill, {}, &h, &p));
  EXPECT_EQ(h.type, kKill);
  EXPECT_EQ(Str(p, "procs"), "2");
  for (FakeProc* f : {&a, &b}) {
    ASSERT_TRUE(f->WaitSeen(1));
    EXPECT_EQ(f->Seen()[0], "KILL");
  }
}

TEST_F(ServerTest, ExitOnLast) {
  ServerOptions o;
  o.exit_on_last = true;
  StartServer(o);
  auto a = std::make_unique<FakeProc>(port_, secret_);
  auto b = std::make_unique<FakeProc>(port_, secret_);
  ASSERT_TRUE(a->connected() && b->connected());
  a->Bye(0);
  usleep(200000);
  EXPECT_FALSE(server_->WaitDone(0.3)) << "exited with a process still connected";
  b->Disconnect();
  EXPECT_TRUE(server_->WaitDone(5));
}

// A process that stops answering after its image was written (SIGSTOP during resume) leaves a complete
// generation, and is dropped alive: the next checkpoint is refused as a hang (silent=1, what `revive run`
// acts on), and --exit-on-last keeps the coordinator while that process still runs (it exited before,
// and `revive run` found no coordinator to tell it about the hang: run.hang's rare failure).
TEST_F(ServerTest, ProcessDroppedInResumeIsAHangAndKeepsTheCoordinator) {
  ServerOptions o;
  o.phase_timeout = 1;
  o.exit_on_last = true;
  StartServer(o);
  pid_t alive = fork();
  if (alive == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(alive, 0);
  // Named as the kernel names the child (a fork of this test), so that it is recognised as that process.
  char comm[32] = "";
  std::ifstream("/proc/self/comm").getline(comm, sizeof comm);
  {
    FakeProc b(port_, secret_, comm, false, 0, uint64_t(alive));
    b.ActAt("resume", FakeProc::Act::kHang);
    auto done = Checkpoint();
    EXPECT_EQ(done["ok"], "1") << done["error"];
  }
  usleep(300000);
  EXPECT_FALSE(server_->WaitDone(0.3)) << "exited while a dropped process still runs";
  auto next = Checkpoint();
  EXPECT_EQ(next["ok"], "0");
  EXPECT_EQ(next["silent"], "1");
  EXPECT_NE(next["error"].find("did not answer phase resume"), std::string::npos) << next["error"];
  kill(alive, SIGKILL);
  waitpid(alive, nullptr, 0);
  EXPECT_TRUE(server_->WaitDone(5));
}

TEST_F(ServerTest, IntervalCheckpoints) {
  ServerOptions o;
  o.interval = 0.3;
  StartServer(o);
  FakeProc a(port_, secret_);
  for (int i = 0; i < 500 && !Exists(dir_.path + "/ckpt-2/MANIFEST.json"); i++) usleep(10000);
  EXPECT_TRUE(Exists(dir_.path + "/ckpt-1/MANIFEST.json"));
  EXPECT_TRUE(Exists(dir_.path + "/ckpt-2/MANIFEST.json"));
}

TEST_F(ServerTest, RestartBarrierWaitsForEveryProcessOfTheManifest) {
  uint64_t u1, u2;
  CheckpointTwoThenNewServer(&u1, &u2);
  FakeProc ra(port_, secret_, "a", /*restart=*/true, u1);
  ASSERT_TRUE(ra.connected()) << ra.error();
  EXPECT_EQ(ra.upid(), u1);
  usleep(300000);
  EXPECT_TRUE(ra.Seen().empty()) << "restart phases began before every process was back";
  FakeProc rb(port_, secret_, "b", true, u2);
  for (FakeProc* p : {&ra, &rb}) {
    ASSERT_TRUE(p->WaitSeen(3));
    EXPECT_EQ(p->Seen(), (std::vector<std::string>{"reconnect", "refill", "resume:1"}));
  }
  // A new process gets an upid that does not clash with the restored ones; a checkpoint covers all three.
  FakeProc fresh(port_, secret_, "c");
  EXPECT_GT(fresh.upid(), std::max(u1, u2));
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "2");
  EXPECT_EQ(ReadGen(2).procs.size(), 3u);
}

// A coordinator started for a restart (`revive restart`: --restart-manifest, --exit-on-last) that a
// straggler of the killed run reaches first (a fork child the kill missed, exec'ing): when it leaves, the
// coordinator stays for the restart's processes, and the restart completes.
TEST_F(ServerTest, StragglerOfTheKilledRunDoesNotEndTheRestartsCoordinator) {
  uint64_t u1, u2;
  ServerOptions o;
  o.exit_on_last = true;
  CheckpointTwoThenNewServer(&u1, &u2, o);
  server_.reset();
  o.restart_manifest = dir_.path + "/ckpt-1/MANIFEST.json";
  StartServer(o);
  {
    FakeProc straggler(port_, secret_, "sleep");
    ASSERT_TRUE(straggler.connected()) << straggler.error();
    straggler.Bye(0);
  }
  usleep(300000);
  EXPECT_FALSE(server_->WaitDone(0.3)) << "the straggler's leaving ended the restart's coordinator";
  FakeProc ra(port_, secret_, "a", /*restart=*/true, u1), rb(port_, secret_, "b", true, u2);
  for (FakeProc* p : {&ra, &rb}) {
    ASSERT_TRUE(p->connected()) << p->error();
    ASSERT_TRUE(p->WaitSeen(3));
    EXPECT_EQ(p->Seen(), (std::vector<std::string>{"reconnect", "refill", "resume:1"}));
  }
  ra.Bye(0);
  rb.Bye(0);
  EXPECT_TRUE(server_->WaitDone(5)) << "the restart's processes left; --exit-on-last should end it";
}

// A restart whose first process could not be restored (reported before anyone came back): the other
// process of the manifest may still come and is told to exit; once it came (none can come any more)
// and someone asked why, an --exit-on-last coordinator leaves at once, not after its 30 s grace, so a
// retry at once finds the port free (issue 13).
TEST_F(ServerTest, FailedRestartLeavesOnceNoneCanCome) {
  ServerOptions o;
  o.exit_on_last = true;
  uint64_t u1, u2;
  CheckpointTwoThenNewServer(&u1, &u2, o);
  FrameHeader h;
  Payload p;
  {
    Cli reporter(port_, secret_);
    ASSERT_TRUE(reporter.Call(kKill, {{"why", "a: image damaged"}, {"upid", std::to_string(u1)}}, &h, &p));
  }
  // restart_failed, restart_failed_open, restart_ends (the payload lives as long as its client).
  auto status = [&] {
    Cli cli(port_, secret_);
    EXPECT_TRUE(cli.Call(kStatusRequest, {}, &h, &p));
    return Str(p, "restart_failed") + "|" + Str(p, "restart_failed_open") + "|" + Str(p, "restart_ends");
  };
  EXPECT_EQ(status(), "a: image damaged|1|1");
  {
    FakeProc latecomer(port_, secret_, "b", /*restart=*/true, u2);
    ASSERT_TRUE(latecomer.WaitSeen(1));
    EXPECT_EQ(latecomer.Seen()[0], "KILL");
    EXPECT_EQ(status(), "a: image damaged|0|1") << "b came: nobody else can";
  }
  EXPECT_TRUE(server_->WaitDone(5)) << "stayed after the failed restart's last process";
}

// Two-level tree: processes behind a sub-coordinator take part in the root's barriers like direct ones.
class TreeTest : public ServerTest {
 protected:
  void StartSub() {
    ServerOptions o;
    o.port = 0;
    o.ckpt_dir = sub_dir_.path;
    o.secret_file = secret_;
    o.parent = "127.0.0.1:" + std::to_string(port_);
    sub_ = std::make_unique<TestServer>(o);
    Status s = sub_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    sub_port_ = sub_->port();
  }
  TempDir sub_dir_;
  std::unique_ptr<TestServer> sub_;
  uint16_t sub_port_ = 0;
};

TEST_F(TreeTest, CheckpointThroughSubCoordinator) {
  StartServer();
  StartSub();
  FakeProc direct(port_, secret_, "direct"), a(sub_port_, secret_, "left"), b(sub_port_, secret_, "right");
  for (FakeProc* p : {&direct, &a, &b}) ASSERT_TRUE(p->connected()) << p->error();
  std::set<uint64_t> upids = {direct.upid(), a.upid(), b.upid()};
  EXPECT_EQ(upids.size(), 3u) << "the root assigns upids, unique across the tree";
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "3");
  Manifest m = ReadGen(1);
  ASSERT_EQ(m.procs.size(), 3u);
  std::set<std::string> progs;
  for (const auto& p : m.procs) {
    progs.insert(p.prog);
    EXPECT_EQ(p.image, p.prog + "-" + std::to_string(p.upid) + ".rimg");
    EXPECT_TRUE(upids.count(p.upid));
  }
  EXPECT_EQ(progs, (std::set<std::string>{"direct", "left", "right"}));
  for (FakeProc* p : {&direct, &a, &b}) {
    ASSERT_TRUE(p->WaitSeen(4));
    EXPECT_EQ(p->Seen(), (std::vector<std::string>{"suspend", "drain", "write", "resume:1"}));
  }
  // STATUS at the root counts the processes behind the sub; STATUS asked at the sub is the root's.
  for (uint16_t port : {port_, sub_port_}) {
    Cli cli(port, secret_);
    ASSERT_TRUE(cli.ok()) << cli.error();
    FrameHeader h;
    Payload p;
    ASSERT_TRUE(cli.Call(kStatusRequest, {}, &h, &p)) << cli.error();
    EXPECT_EQ(Str(p, "procs"), "3");
    EXPECT_EQ(Str(p, "generation"), "1");
  }
  // A checkpoint requested at the sub is the root's.
  Cli at_sub(sub_port_, secret_);
  FrameHeader h;
  Payload p;
  ASSERT_TRUE(at_sub.Call(kCkptRequest, {}, &h, &p)) << at_sub.error();
  EXPECT_EQ(Str(p, "ok"), "1") << Str(p, "error");
  EXPECT_EQ(Str(p, "generation"), "2");
}

TEST_F(TreeTest, FailureBehindSubNamesTheProcess) {
  StartServer();
  StartSub();
  FakeProc direct(port_, secret_, "direct"), a(sub_port_, secret_, "left"), b(sub_port_, secret_, "right");
  b.ActAt("write", FakeProc::Act::kFail);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("upid " + std::to_string(b.upid()) + " (right"), std::string::npos) << done["error"];
  EXPECT_FALSE(Exists(dir_.path + "/ckpt-1/MANIFEST.json"));
  for (FakeProc* p : {&direct, &a, &b}) {
    ASSERT_TRUE(p->WaitSeen(4));
    EXPECT_EQ(p->Seen().back(), "resume:0");
  }
  // A process behind the sub vanishing mid-checkpoint fails the generation too, and then leaves.
  b.ActAt("", FakeProc::Act::kOk);
  a.ActAt("drain", FakeProc::Act::kDisconnect);
  done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("disconnected during phase drain"), std::string::npos) << done["error"];
  done = Checkpoint();
  EXPECT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "2");
}

// Multi-level storage behind a sub-coordinator (server_tlevels.cpp): the sub checksums its host's images on
// its exchange thread while its loop goes on, and answers the image phase from the loop once the thread
// says (eventfd) it is done; under TSan, that handoff. REVIVE_LEVELS=L1: the images stay in the host's
// node-local directory and the manifest records each one's checksum.
TEST_F(TreeTest, LevelsExchangeOnTheSubsThread) {
  TempDir local;
  struct Env {  // read by the root (levels), the sub (its host) and at each Start
    explicit Env(const std::string& root) {
      setenv("REVIVE_LEVELS", "L1", 1);
      setenv("REVIVE_LOCAL_PATH", root.c_str(), 1);
      setenv("REVIVE_HOST_ID", "hosta", 1);
    }
    ~Env() {
      for (const char* v : {"REVIVE_LEVELS", "REVIVE_LOCAL_PATH", "REVIVE_HOST_ID"}) unsetenv(v);
    }
  } env(local.path);
  StartServer();
  StartSub();
  FakeProc a(sub_port_, secret_, "left"), b(sub_port_, secret_, "right");
  for (FakeProc* p : {&a, &b}) ASSERT_TRUE(p->connected()) << p->error();
  for (uint64_t gen = 1; gen <= 3; gen++) {
    auto done = Checkpoint();
    ASSERT_EQ(done["ok"], "1") << done["error"];
    Manifest m = ReadGen(gen);
    ASSERT_EQ(m.procs.size(), 2u);
    for (const auto& p : m.procs) {
      EXPECT_TRUE(p.local);
      const std::string f = TLocalGenDir(local.path, "hosta", m.job, gen) + "/" + p.image;
      uint64_t h = 0;
      ASSERT_TRUE(FileXxh3(f, &h).ok()) << f;
      EXPECT_EQ(p.xxh3, h) << f;
    }
  }
}

// Behind a sub-coordinator too: a process that exits before it was suspended is left out of a retry.
TEST_F(TreeTest, ProcessLeavingBehindSubBeforeSuspendIsTakenAgain) {
  StartServer();
  StartSub();
  FakeProc direct(port_, secret_, "direct"), a(sub_port_, secret_, "left"), b(sub_port_, secret_, "right");
  a.ActAt("suspend", FakeProc::Act::kDisconnect);
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "2");
  b.ActAt("write", FakeProc::Act::kRefuseOnce);
  done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["generation"], "2");
}

// The same behind a sub-coordinator, which sees the rank's end on its host and tells the root.
TEST_F(TreeTest, DeadMpiRankBehindSubRefusesLaterCheckpoints) {
  StartServer();
  StartSub();
  pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  FakeProc direct(port_, secret_, "mpiexec"), keep(sub_port_, secret_, "ring", false, 0, 0, "0");
  { FakeProc r1(sub_port_, secret_, "ring", false, 0, uint64_t(dead), "1"); }
  usleep(300000);
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "0");
  EXPECT_NE(done["error"].find("refused: MPI rank 1, process upid"), std::string::npos) << done["error"];
  EXPECT_NE(done["error"].find("(ring, pid " + std::to_string(dead)), std::string::npos) << done["error"];
}

TEST_F(TreeTest, ForkExitAfterResumeBehindSub) {
  ServerOptions o;
  o.fork = true;
  StartServer(o);
  StartSub();
  FakeProc direct(port_, secret_, "direct"), a(sub_port_, secret_, "left"), b(sub_port_, secret_, "right");
  a.ActAt("resume", FakeProc::Act::kExitAfterResume);
  auto done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "3");
  b.ActAt("resume", FakeProc::Act::kVanishAfterResume);
  done = Checkpoint();
  ASSERT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(done["images"], "1");
}

TEST_F(TreeTest, RestartThroughSubCoordinator) {
  StartServer();
  uint64_t u1, u2;
  {
    StartSub();
    FakeProc a(port_, secret_, "a"), b(sub_port_, secret_, "b");
    u1 = a.upid();
    u2 = b.upid();
    auto done = Checkpoint();
    ASSERT_EQ(done["ok"], "1") << done["error"];
    sub_.reset();
  }
  server_.reset();
  StartServer();
  StartSub();
  FakeProc rb(sub_port_, secret_, "b", /*restart=*/true, u2);
  ASSERT_TRUE(rb.connected()) << rb.error();
  EXPECT_EQ(rb.upid(), u2);
  usleep(300000);
  EXPECT_TRUE(rb.Seen().empty()) << "restart phases began before every process was back";
  FakeProc ra(port_, secret_, "a", true, u1);
  for (FakeProc* p : {&ra, &rb}) {
    ASSERT_TRUE(p->WaitSeen(3));
    EXPECT_EQ(p->Seen(), (std::vector<std::string>{"reconnect", "refill", "resume:1"}));
  }
  auto done = Checkpoint();
  EXPECT_EQ(done["ok"], "1") << done["error"];
  EXPECT_EQ(ReadGen(2).procs.size(), 2u);
}

TEST_F(TreeTest, PubSubAndKillAcrossTheTree) {
  StartServer();
  StartSub();
  FakeProc a(sub_port_, secret_, "a");
  Cli at_root(port_, secret_), at_sub(sub_port_, secret_);
  ASSERT_TRUE(at_root.ok() && at_sub.ok());
  FrameBuilder b(at_root.client().tx_buffer(), Client::kTxCap, kLookup, 5);
  b.add("key", "addr.9").add("wait", "1");
  ASSERT_TRUE(at_root.client().send(b));
  FrameBuilder pb(at_sub.client().tx_buffer(), Client::kTxCap, kPublish, 1);
  pb.add("key", "addr.9").add("value", "10.0.0.9:5000");
  ASSERT_TRUE(at_sub.client().send(pb));
  FrameHeader h;
  Payload p;
  ASSERT_EQ(1, at_root.client().recv(&h, &p, 5000)) << at_root.client().error();
  EXPECT_EQ(Str(p, "value"), "10.0.0.9:5000");
  ASSERT_TRUE(at_sub.Call(kLookup, {{"key", "addr.9"}, {"wait", "0"}}, &h, &p));
  EXPECT_EQ(Str(p, "value"), "10.0.0.9:5000");
  ASSERT_TRUE(at_root.Call(kKill, {}, &h, &p));
  EXPECT_EQ(Str(p, "procs"), "1");
  ASSERT_TRUE(a.WaitSeen(1));
  EXPECT_EQ(a.Seen()[0], "KILL");
}

TEST_F(TreeTest, SubExitsWhenTheRootGoesAndRefusesSubs) {
  StartServer();
  StartSub();
  Client c;
  EXPECT_FALSE(c.connect(Opts(sub_port_, secret_, "sub"), nullptr));
  EXPECT_NE(std::string(c.error()).find("role=sub"), std::string::npos) << c.error();
  server_.reset();
  EXPECT_TRUE(sub_->WaitDone(5));
}

TEST_F(TreeTest, ExitOnLastCountsProcessesBehindSubs) {
  ServerOptions o;
  o.exit_on_last = true;
  StartServer(o);
  StartSub();
  auto a = std::make_unique<FakeProc>(sub_port_, secret_);
  ASSERT_TRUE(a->connected());
  usleep(200000);
  EXPECT_FALSE(server_->WaitDone(0.3)) << "root exited with a process behind its sub";
  a->Bye(0);
  EXPECT_TRUE(server_->WaitDone(5));
}

}  // namespace
}  // namespace revive::coord::testing
