// A deterministic iterative program checkpointed with revive (options from the environment).
// Usage: killrun OUT_FILE [ITERATIONS]. Writes the final state to OUT_FILE; says on stderr whether it
// restarted. Used by kill_restart.sh: SIGKILLed runs + a final run must give the bytes of an
// uninterrupted run.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "revive/checkpoint.hpp"

struct Stats {
  double sum;
  int64_t updates;
};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_FILE [ITERATIONS]\n", argv[0]);
    return 2;
  }
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 3000;
  try {
    std::vector<double> u(1 << 15), tmp(u.size());
    for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.001 * static_cast<double>(i));
    Stats stats{0, 0};
    std::string log;
    int64_t it = 0;
    revive::Checkpoint cp("killrun");
    cp.add("u", u);
    cp.add("stats", &stats);
    cp.add("log", log);
    cp.commit();
    if (cp.restart_if_needed(&it)) std::fprintf(stderr, "killrun: restarted at iteration %lld\n", static_cast<long long>(it));
    for (; it < n; ++it) {
      for (size_t i = 1; i + 1 < u.size(); ++i) tmp[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
      for (size_t i = 1; i + 1 < u.size(); ++i) u[i] = tmp[i];
      stats.sum += u[u.size() / 3];
      stats.updates++;
      if (it % 500 == 0) log += std::to_string(it) + ";";
      cp.update_and_write(it, 25);
    }
    cp.wait();
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    bool ok = write(fd, u.data(), u.size() * sizeof(double)) == static_cast<ssize_t>(u.size() * sizeof(double)) &&
              write(fd, &stats, sizeof stats) == static_cast<ssize_t>(sizeof stats) &&
              write(fd, log.data(), log.size()) == static_cast<ssize_t>(log.size());
    close(fd);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "killrun: %s\n", e.what());
    return 1;
  }
}
