// hooks_cpp STEPS [LONG_STEP LONG_MS]: hooks_c.c's program through the C++ interface (<revive/hooks.hpp>:
// std::function callbacks with RAII registrations, RAII critical sections). Same stdout and events.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <revive/hooks.hpp>

namespace {

void event(const std::string& line) {
  const char* path = std::getenv("HOOKS_EVENTS");
  if (!path) return;
  std::string l = line + "\n";
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, l.data(), l.size()) != ssize_t(l.size())) std::abort();
  close(fd);
}

void sleep_ms(long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

int main(int argc, char** argv) {
  namespace hk = revive::hooks;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  const int long_step = argc > 3 ? std::atoi(argv[2]) : -1;
  const long long_ms = argc > 3 ? std::atol(argv[3]) : 0;
  event("active=" + std::to_string(hk::active()));
  std::atomic<int> n_ckpt{0}, n_cont{0}, n_restart{0};
  const std::string tag = "cpp";
  auto r1 = hk::on_checkpoint([&] { event("checkpoint n=" + std::to_string(++n_ckpt) + " tag=" + tag); });
  auto r2 = hk::on_continue([&] { event("continue n=" + std::to_string(++n_cont) + " tag=" + tag); });
  auto r3 = hk::on_restart([&] {
    event("restart n=" + std::to_string(++n_restart) + " checkpoints=" + std::to_string(n_ckpt.load()) +
          " continues=" + std::to_string(n_cont.load()) + " tag=" + tag);
  });
  {  // a registration that goes away before any checkpoint: never called
    auto gone = hk::on_checkpoint([] { event("unregistered callback ran"); });
  }
  // A callback that throws: reported, and the others still run.
  auto r4 = hk::on_continue([] { throw std::runtime_error("from a continue callback"); });
  unsigned long a = 0, b = 0;
  int after = 0;
  for (int i = 0; i < steps; ++i) {
    {
      hk::CriticalSection outer;
      hk::CriticalSection inner;
      a += unsigned(i);
      if (i == long_step) {
        event("long begin");
        sleep_ms(long_ms);
        event("long end");
      }
      b += unsigned(i);
    }
    if (revive_critical_depth() != 0 || a != b) return 6;
    if (long_step >= 0 && i > long_step && after < 5) event("after " + std::to_string(++after));
    std::printf("step %d a=%lu b=%lu\n", i, a, b);
    std::fflush(stdout);
    sleep_ms(20);
  }
  std::printf("done\n");
  return 0;
}
