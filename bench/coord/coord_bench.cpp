// Coordinator barrier cost: time of a full checkpoint round (suspend, drain, write, manifest, resume) with
// N processes that do no work of their own, against the physical limit measured in the same run:
//   4 rounds of an N-way loopback ping-pong of the same frame sizes (one message to each process, one
//   answer back, through the same kernel TCP path), plus the durable manifest write (write + fsync +
//   rename + directory fsync of the same bytes), plus creating N empty image files.
// Prints medians of several rounds and their ratio. Never asserted.
// With --subs K the processes connect to K sub-coordinators (two-level tree) instead of the root.
//   coord_bench [--procs N]... [--subs K] [--rounds R]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coord/client.h"
#include "coord/server.h"

using namespace revive;
using namespace revive::coord;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A process that answers every phase at once (write: an empty image file).
class Proc {
 public:
  Proc(uint16_t port, const std::string& secret) : secret_(secret) {
    ClientOptions o;
    o.port = port;
    o.secret_file = secret_.c_str();
    o.prog = "bench";
    ok_ = c_.connect(o, &w_);
    if (ok_) t_ = std::thread([this] { Loop(); });
  }
  ~Proc() {
    stop_ = true;
    if (t_.joinable()) t_.join();
    c_.close();
  }
  bool ok() const { return ok_; }

 private:
  void Loop() {
    while (!stop_) {
      FrameHeader h;
      Payload p;
      int r = c_.recv(&h, &p, 50);
      if (r < 0) return;
      if (r == 0 || h.type != kPhase) continue;
      char name[32], dir[4096];
      p.get_str("name", name, sizeof name);
      p.get_str("dir", dir, sizeof dir);
      FrameBuilder b(c_.tx_buffer(), Client::kTxCap, kPhaseDone, h.seq);
      b.add("name", name).add("ok", "1");
      std::string image;
      if (strcmp(name, "write") == 0) {
        image = std::string(dir) + "/bench-" + std::to_string(w_.upid) + ".rimg";
        close(open(image.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        b.add("image", image.c_str()).add_u64("bytes", 1);
      }
      c_.send(b);
    }
  }
  std::string secret_;
  Client c_;
  Welcome w_{};
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread t_;
};

// N echo threads on loopback TCP, and a driver that sends one frame-sized message to each and waits for
// every answer: the transport part of one barrier phase, without any protocol logic.
class RawFanout {
 public:
  explicit RawFanout(int n) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bind(lfd, (sockaddr*)&a, sizeof a);
    listen(lfd, 4096);
    socklen_t len = sizeof a;
    getsockname(lfd, (sockaddr*)&a, &len);
    for (int i = 0; i < n; i++) {
      int c = socket(AF_INET, SOCK_STREAM, 0);
      connect(c, (sockaddr*)&a, sizeof a);
      int s = accept(lfd, nullptr, nullptr);
      int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      server_.push_back(s);
      echo_.emplace_back([c] {
        char buf[512];
        for (;;) {
          ssize_t r = read(c, buf, sizeof buf);
          if (r <= 0) break;
          if (write(c, buf, (size_t)r) != r) break;
        }
        close(c);
      });
    }
    close(lfd);
  }
  ~RawFanout() {
    for (int s : server_) shutdown(s, SHUT_RDWR);
    for (auto& t : echo_) t.join();
    for (int s : server_) close(s);
  }
  // One phase: a `bytes`-long message to each, all echoes back.
  void Round(size_t bytes) {
    char buf[512] = {0};
    for (int s : server_) (void)!write(s, buf, bytes);
    std::vector<pollfd> p;
    for (int s : server_) p.push_back({s, POLLIN, 0});
    size_t done = 0;
    std::vector<size_t> got(server_.size(), 0);
    while (done < server_.size()) {
      poll(p.data(), p.size(), -1);
      for (size_t i = 0; i < p.size(); i++) {
        if (!(p[i].revents & POLLIN)) continue;
        ssize_t r = read(p[i].fd, buf, sizeof buf);
        if (r > 0 && (got[i] += (size_t)r) >= bytes) {
          done++;
          p[i].fd = -p[i].fd - 1;  // ignore from now on
        }
      }
    }
  }

 private:
  std::vector<int> server_;
  std::vector<std::thread> echo_;
};

double DurableWrite(const std::string& dir, size_t bytes) {
  std::string data(bytes, 'x');
  auto t0 = Clock::now();
  std::string tmp = dir + "/raw.tmp", dst = dir + "/raw.json";
  int fd = open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  (void)!write(fd, data.data(), data.size());
  fsync(fd);
  close(fd);
  rename(tmp.c_str(), dst.c_str());
  int d = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  fsync(d);
  close(d);
  return Ms(Clock::now() - t0);
}

double CreateFiles(const std::string& dir, int n) {
  auto t0 = Clock::now();
  for (int i = 0; i < n; i++) close(open((dir + "/f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0600));
  return Ms(Clock::now() - t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  int rounds = 7, subs = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--procs") == 0) sizes.push_back(atoi(argv[i + 1]));
    else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--subs") == 0) subs = atoi(argv[i + 1]);
  }
  if (sizes.empty()) sizes = {1, 16, 128};
  setenv("REVIVE_LOG", "0", 1);
  printf("medians of %d rounds; limit = 4 loopback fan-out round trips + durable manifest write + N file "
         "creates; %d sub-coordinators\n%6s %10s %10s %8s   %10s %10s %10s\n", rounds, subs, "procs", "round ms", "limit ms", "ratio",
         "fanout ms", "fsync ms", "create ms");
  for (int n : sizes) {
    char tmpl[] = "/tmp/revive-coord-bench-XXXXXX";
    std::string dir = mkdtemp(tmpl);
    ServerOptions o;
    o.port = 0;
    o.ckpt_dir = dir;
    Server server(o);
    Status s = server.Start();
    if (!s.ok()) {
      fprintf(stderr, "coord_bench: %s\n", s.message().c_str());
      return 1;
    }
    std::thread loop([&] { server.Run(); });
    std::string secret = dir + "/.revive-secret";
    std::vector<std::unique_ptr<Server>> sub_servers;
    std::vector<std::thread> sub_loops;
    for (int k = 0; k < subs; k++) {
      ServerOptions so;
      so.port = 0;
      so.ckpt_dir = dir;
      so.parent = "127.0.0.1:" + std::to_string(server.port());
      sub_servers.push_back(std::make_unique<Server>(so));
      Status ss = sub_servers.back()->Start();
      if (!ss.ok()) {
        fprintf(stderr, "coord_bench: sub-coordinator: %s\n", ss.message().c_str());
        return 1;
      }
      sub_loops.emplace_back([s = sub_servers.back().get()] { s->Run(); });
    }
    {
      std::vector<std::unique_ptr<Proc>> procs;
      for (int i = 0; i < n; i++)
        procs.push_back(std::make_unique<Proc>(subs ? sub_servers[i % subs]->port() : server.port(), secret));
      ClientOptions co;
      co.port = server.port();
      co.secret_file = secret.c_str();
      co.role = "cli";
      Client cli;
      if (!cli.connect(co, nullptr)) {
        fprintf(stderr, "coord_bench: %s\n", cli.error());
        return 1;
      }
      std::vector<double> t, limit, net, durable, creates;
      size_t manifest_bytes = 0;
      for (int r = 0; r < rounds; r++) {
        FrameBuilder b(cli.tx_buffer(), Client::kTxCap, kCkptRequest, cli.next_seq());
        auto t0 = Clock::now();
        cli.send(b);
        FrameHeader h;
        Payload p;
        if (cli.recv(&h, &p, 60000) != 1) {
          fprintf(stderr, "coord_bench: %s\n", cli.error());
          return 1;
        }
        t.push_back(Ms(Clock::now() - t0));
        std::ifstream mf(dir + "/ckpt-" + std::to_string(r + 1) + "/MANIFEST.json", std::ios::ate);
        manifest_bytes = (size_t)mf.tellg();
      }
      cli.close();
      procs.clear();
      RawFanout raw(n);
      for (int r = 0; r < rounds; r++) {
        auto t0 = Clock::now();
        for (int phase = 0; phase < 4; phase++) raw.Round(phase == 2 ? 120 : 60);  // PHASE / PHASE_DONE sizes
        double fan = Ms(Clock::now() - t0);
        std::string fdir = dir + "/raw-" + std::to_string(r);
        mkdir(fdir.c_str(), 0700);
        double dw = DurableWrite(fdir, manifest_bytes), cr = CreateFiles(fdir, n);
        net.push_back(fan);
        durable.push_back(dw);
        creates.push_back(cr);
        limit.push_back(fan + dw + cr);
      }
      double a = Median(t), l = Median(limit);
      printf("%6d %10.3f %10.3f %8.2f   %10.3f %10.3f %10.3f\n", n, a, l, a / l, Median(net), Median(durable),
             Median(creates));
    }
    for (auto& ss : sub_servers) ss->Stop();
    for (auto& t : sub_loops) t.join();
    server.Stop();
    loop.join();
    (void)!system(("rm -rf '" + dir + "'").c_str());
  }
  return 0;
}
