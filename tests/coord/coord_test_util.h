// Test helpers: a coordinator on a free port in a temporary directory, and fake processes that speak the
// process side of the protocol with the real client (threads, so many fit in one test).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coord/client.h"
#include "coord/server.h"

namespace revive::coord::testing {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/revive-coord-test-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { (void)!system(("rm -rf '" + path + "'").c_str()); }
};

class TestServer {
 public:
  explicit TestServer(ServerOptions o) : server_(std::move(o)) {}
  ~TestServer() { StopAndJoin(); }
  Status Start() {
    Status s = server_.Start();
    if (s.ok()) thread_ = std::thread([this] { result_ = server_.Run(); done_ = true; });
    return s;
  }
  void StopAndJoin() {
    if (thread_.joinable()) {
      server_.Stop();
      thread_.join();
    }
  }
  bool WaitDone(double seconds) {
    for (int i = 0; i < seconds * 100 && !done_; i++) usleep(10000);
    if (done_ && thread_.joinable()) thread_.join();
    return done_;
  }
  uint16_t port() const { return server_.port(); }

 private:
  Server server_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  Status result_;
};

inline ClientOptions Opts(uint16_t port, const std::string& secret, const char* role = "proc",
                          const char* prog = "fake") {
  ClientOptions o;
  o.port = port;
  o.secret_file = secret.c_str();
  o.role = role;
  o.prog = prog;
  o.connect_timeout_ms = 5000;
  o.io_timeout_ms = 10000;
  return o;
}

// A process: answers phases in its own thread. Can fail (ok=0) or vanish at a given phase, or hang, or
// refuse for now (ok=0 retry=1, as a process with a fork in flight): always, or once.
class FakeProc {
 public:
  // kExitAfterResume (--fork): answers resume, reports its image at once (early=1) and leaves, as an
  // exiting process does; kVanishAfterResume: answers resume and leaves without a report.
  enum class Act { kOk, kFail, kDisconnect, kHang, kRefuse, kRefuseOnce, kExitAfterResume, kVanishAfterResume };
  // pid: what HELLO says (0: ours; every FakeProc of a test then looks like one process's exec'd images).
  // mpi_rank: HELLO mpi_rank (an MPI launcher's rank), "" for none.
  FakeProc(uint16_t port, std::string secret, std::string name = "fake", bool restart = false, uint64_t upid = 0,
           uint64_t pid = 0, std::string mpi_rank = "")
      : secret_(std::move(secret)), name_(std::move(name)), rank_(std::move(mpi_rank)) {
    ClientOptions o = Opts(port, secret_, "proc", name_.c_str());
    o.mpi_rank = rank_.c_str();
    o.restart = restart;
    o.upid = upid;
    o.pid = pid;
    connected_ = client_.connect(o, &welcome_);
    if (connected_) thread_ = std::thread([this] { Loop(); });
  }
  ~FakeProc() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    client_.close();
  }
  void ActAt(const std::string& phase, Act a) {
    std::lock_guard<std::mutex> l(mu_);
    act_phase_ = phase;
    act_ = a;
  }
  bool connected() const { return connected_; }
  const char* error() const { return client_.error(); }
  uint64_t upid() const { return welcome_.upid; }
  std::vector<std::string> Seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  bool WaitSeen(size_t n, double seconds = 10) {
    for (int i = 0; i < seconds * 100; i++) {
      if (Seen().size() >= n) return true;
      usleep(10000);
    }
    return false;
  }
  bool gone() const { return gone_; }
  // Sends BYE and closes (exit-on-last tests).
  void Bye(int status) {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    FrameBuilder b(client_.tx_buffer(), Client::kTxCap, kBye, client_.next_seq());
    b.add_i64("status", status);
    client_.send(b);
    client_.close();
  }
  void Disconnect() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    client_.close();
  }

 private:
  void Loop() {
    while (!stop_) {
      FrameHeader h;
      Payload p;
      int r = client_.recv(&h, &p, 50);
      if (r == 0) continue;
      if (r < 0) {
        gone_ = true;
        return;
      }
      char name[32] = "", ok[4] = "";
      p.get_str("name", name, sizeof name);
      p.get_str("ok", ok, sizeof ok);
      std::string record = h.type == kKill ? "KILL" : h.type == kError ? "ERROR" : std::string(name);
      if (h.type == kPhase && std::string(name) == "resume") record += std::string(":") + ok;
      Act act;
      std::string act_phase;
      {
        std::lock_guard<std::mutex> l(mu_);
        seen_.push_back(record);
        act = act_;
        act_phase = act_phase_;
      }
      if (h.type != kPhase) continue;
      if (act_phase == name && act == Act::kDisconnect) {
        client_.close();
        gone_ = true;
        return;
      }
      if (act_phase == name && act == Act::kHang) continue;
      char dir[4096] = "";
      p.get_str("dir", dir, sizeof dir);
      FrameBuilder b(client_.tx_buffer(), Client::kTxCap, kPhaseDone, h.seq);
      b.add("name", name);
      if (act_phase == name && act == Act::kFail) {
        b.add("ok", "0").add("error", "disk full (simulated)");
      } else if (act_phase == name && (act == Act::kRefuse || act == Act::kRefuseOnce)) {
        b.add("ok", "0").add("error", "proctree: refused for now (simulated fork)").add("retry", "1");
        if (act == Act::kRefuseOnce) ActAt("", Act::kOk);
      } else {
        b.add("ok", "1");
        // The image: at write, or at durable under --fork (a forked writer's image comes then).
        if (std::string(name) == "write" || std::string(name) == "durable") {
          std::string image = std::string(dir) + "/" + name_ + "-" + std::to_string(welcome_.upid) + ".rimg";
          std::ofstream(image) << "image of upid " << welcome_.upid << "\n";
          b.add("image", image.c_str()).add_u64("bytes", 0);
        }
      }
      client_.send(b);
      if (act_phase == name && (act == Act::kExitAfterResume || act == Act::kVanishAfterResume)) {
        if (act == Act::kExitAfterResume) {
          uint64_t gen = 0;
          p.get_u64("generation", &gen);
          std::string image = std::string(dir) + "/" + name_ + "-" + std::to_string(welcome_.upid) + ".rimg";
          std::ofstream(image) << "image of upid " << welcome_.upid << "\n";
          FrameBuilder e(client_.tx_buffer(), Client::kTxCap, kPhaseDone, 0);
          e.add("name", "durable").add("ok", "1").add_u64("generation", gen).add("early", "1")
              .add("image", image.c_str()).add_u64("bytes", 0);
          client_.send(e);
        }
        client_.close();
        gone_ = true;
        return;
      }
    }
  }

  std::string secret_, name_, rank_;
  Client client_;
  Welcome welcome_{};
  bool connected_ = false;
  std::thread thread_;
  std::atomic<bool> stop_{false}, gone_{false};
  std::mutex mu_;
  std::vector<std::string> seen_;
  std::string act_phase_;
  Act act_ = Act::kOk;
};

// A CLI peer: one request, one reply.
class Cli {
 public:
  Cli(uint16_t port, const std::string& secret) : secret_(secret) {
    ok_ = client_.connect(Opts(port, secret_, "cli", "revive"), nullptr);
  }
  ~Cli() { client_.close(); }
  bool ok() const { return ok_; }
  const char* error() const { return client_.error(); }
  Client& client() { return client_; }
  // Sends type with fields and waits for one reply (returns false on error/timeout).
  bool Call(uint16_t type, std::vector<std::pair<std::string, std::string>> fields, FrameHeader* h, Payload* p,
            int timeout_ms = 20000) {
    FrameBuilder b(client_.tx_buffer(), Client::kTxCap, type, client_.next_seq());
    for (auto& [k, v] : fields) b.add(k.c_str(), v.c_str());
    if (!client_.send(b)) return false;
    return client_.recv(h, p, timeout_ms) == 1;
  }

 private:
  std::string secret_;
  Client client_;
  bool ok_ = false;
};

inline std::string Str(const Payload& p, const char* key) {
  const char* v;
  size_t n;
  return p.get(key, &v, &n) ? std::string(v, n) : std::string("<missing>");
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace revive::coord::testing
