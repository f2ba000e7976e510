// bench/hooks: what the application hooks cost (docs/hooks.md, docs/performance.md).
//   hooks_bench REVIVE INJECT   — the driver: runs the two measurements below and prints figures with ratios.
// 1. A revive_critical_begin/end pair, in ns, against an empty loop of the same trip count: without revive
//    (the library finds no engine: a thread-local counter), and under `revive launch` (one atomic add and
//    one atomic subtract, plus the gate check). Median of 7 runs of 20M pairs.
// 2. Checkpoint latency (`revive checkpoint` wall time, median of 9) of a process with no callback
//    registered, with one empty callback of each kind (the request is deferred to the hooks thread and
//    back), and with no callback but an idle thread (one more thread to suspend, as the hooks thread is).
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <revive/hooks.h>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Child mode "pair": prints "empty_ns=X pair_ns=Y active=A".
int pair_mode() {
  constexpr long kN = 20000000;
  std::vector<double> empty, pair;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = Clock::now();
    for (long i = 0; i < kN; ++i) asm volatile("" ::: "memory");
    auto t1 = Clock::now();
    for (long i = 0; i < kN; ++i) {
      revive_critical_begin();
      asm volatile("" ::: "memory");
      revive_critical_end();
    }
    auto t2 = Clock::now();
    empty.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kN);
    pair.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / kN);
  }
  // The fastest of 7: on a shared machine the slower rounds measure other people's work.
  printf("empty_ns=%.3f pair_ns=%.3f active=%d\n", *std::min_element(empty.begin(), empty.end()),
         *std::min_element(pair.begin(), pair.end()), revive_hooks_active());
  return 0;
}

void nop(void*) {}

// Child mode "serve N": N empty callbacks of each kind, then idles until killed. N = -1: no callback but
// an idle thread of its own (what the hooks thread costs a checkpoint as one more thread to suspend).
int serve_mode(int n) {
  if (n < 0) std::thread([] { for (;;) pause(); }).detach();
  for (int i = 0; i < n; ++i)
    for (int k = REVIVE_HOOK_CHECKPOINT; k <= REVIVE_HOOK_RESTART; ++k) revive_register_callback(k, nop, nullptr);
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

// A port nobody listens on now, below the ephemeral range (other engineers' coordinators may hold some).
int free_port() {
  for (int i = 0; i < 200; ++i) {
    int port = 20000 + int((getpid() * 7919L + i * 104729L) % 12000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (ok) return port;
  }
  return 0;
}

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, f)) out += buf;
  pclose(f);
  return out;
}

int driver(const char* self, const char* revive, const char* inject) {
  char tmpl[] = "/tmp/revive-hooks-bench-XXXXXX";
  const char* tmp = mkdtemp(tmpl);
  if (!tmp) return 1;
  setenv("REVIVE_INJECT_LIB", inject, 1);
  setenv("REVIVE_LOG", "0", 1);
  setenv("REVIVE_LOCAL_DIRS", "", 1);  // the files plugin's walk of /tmp would time other people's files
  const int port = free_port();
  if (!port) return 1;
  auto launch = [&](const std::string& dir, const std::string& args) {
    return "exec " + std::string(revive) + " launch --port " + std::to_string(port) + " --ckpt-dir " + tmp + "/" + dir +
           " -- " + self + " " + args;
  };
  double e0 = 1e9, p0 = 1e9, e1 = 1e9, p1 = 1e9;
  for (int round = 0; round < 3; ++round) {  // alternating, the fastest of each kind
    double e, p;
    int a0 = -1, a1 = -1;
    std::string plain = capture(std::string(self) + " pair");
    if (sscanf(plain.c_str(), "empty_ns=%lf pair_ns=%lf active=%d", &e, &p, &a0) != 3 || a0 != 0) {
      fprintf(stderr, "hooks_bench: cannot measure without revive: %s\n", plain.c_str());
      return 1;
    }
    e0 = std::min(e0, e), p0 = std::min(p0, p);
    std::string under = capture(launch("pair" + std::to_string(round), "pair"));
    if (sscanf(under.c_str(), "empty_ns=%lf pair_ns=%lf active=%d", &e, &p, &a1) != 3 || a1 != 1) {
      fprintf(stderr, "hooks_bench: cannot measure under revive: %s\n", under.c_str());
      return 1;
    }
    e1 = std::min(e1, e), p1 = std::min(p1, p);
  }
  printf("critical_begin/end pair, 20M pairs, fastest of 3x7 rounds:\n");
  printf("  empty loop               %7.2f ns/iter\n", e0);
  printf("  pair without revive      %7.2f ns  (+%.2f ns over the empty loop, x%.1f)\n", p0, p0 - e0, p0 / e0);
  printf("  pair under revive launch %7.2f ns  (+%.2f ns over the empty loop, x%.1f; x%.1f the no-revive pair)\n", p1,
         p1 - e1, p1 / e1, p1 / p0);

  double lat[3] = {0, 0, 0};  // no callback, one per kind, no callback + an idle thread
  const std::string log = std::string(tmp) + "/engine.log";
  for (int cb = 0; cb <= 2; ++cb) {
    std::string dir = "ck" + std::to_string(cb);
    // With callbacks, REVIVE_LOG=2: the engine says how long each round trip through the hooks thread took.
    std::string cmd = (cb == 1 ? "REVIVE_LOG=2 " : "") + launch(dir, "serve " + std::to_string(cb == 2 ? -1 : cb)) +
                      " </dev/null" + (cb == 1 ? " 2>" + log : "");
    FILE* child = popen(cmd.c_str(), "r");
    char line[64] = "";
    if (!child || !fgets(line, sizeof line, child)) return 1;
    std::vector<double> t;
    for (int i = 0; i < 10; ++i) {
      auto t0 = Clock::now();
      std::string r = capture(std::string(revive) + " checkpoint --port " + std::to_string(port) + " --ckpt-dir " + tmp +
                              "/" + dir + " 2>&1");
      auto t1 = Clock::now();
      if (r.find("ckpt-") == std::string::npos) {
        fprintf(stderr, "hooks_bench: checkpoint failed: %s\n", r.c_str());
        return 1;
      }
      if (i > 0) t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());  // first: warm-up
    }
    lat[cb] = median(t);
    capture(std::string(revive) + " kill --port " + std::to_string(port) + " --ckpt-dir " + tmp + "/" + dir);
    pclose(child);
  }
  std::vector<double> trip;
  if (FILE* f = fopen(log.c_str(), "r")) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (const char* p = strstr(line, "checkpoint callbacks took ")) trip.push_back(atof(p + 26) / 1000.0);
    fclose(f);
  }
  printf("checkpoint latency (revive checkpoint wall time, median of 9):\n");
  printf("  no callback registered       %7.2f ms\n", lat[0]);
  printf("  one empty callback per kind  %7.2f ms  (+%.2f ms, x%.2f)\n", lat[1], lat[1] - lat[0], lat[1] / lat[0]);
  printf("  no callback, one idle thread %7.2f ms  (+%.2f ms, x%.2f: the hooks thread's share as a thread)\n", lat[2],
         lat[2] - lat[0], lat[2] / lat[0]);
  if (!trip.empty())
    printf("  round trip request -> hooks thread -> callbacks -> engine, as the engine measured it: median %.3f ms "
           "(%zu checkpoints), %.1f %% of the no-callback checkpoint\n",
           median(trip), trip.size(), 100 * median(trip) / lat[0]);
  capture(std::string("rm -rf ") + tmp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && !strcmp(argv[1], "pair")) return pair_mode();
  if (argc >= 3 && !strcmp(argv[1], "serve")) return serve_mode(atoi(argv[2]));
  if (argc < 3) {
    fprintf(stderr, "usage: hooks_bench REVIVE INJECT_LIB\n");
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  return driver(self, argv[1], argv[2]);
}
