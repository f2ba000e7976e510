#include "cli/ckpt_signal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/common.h"

namespace revive::cli {
namespace {

volatile sig_atomic_t g_requests;  // signals seen, not yet served
volatile pid_t g_forward;          // where forwarded signals go
Target g_target;
std::vector<pid_t> g_checkpointers;  // `revive checkpoint` children still running

void on_checkpoint_signal(int) { g_requests = g_requests + 1; }

// The forked child that serves one signal: runs `revive checkpoint` and, while the computation is not
// ready for one yet (the coordinator still waits for restored processes, or none has connected since the
// launch or restart began), tries again every 0.5 s for up to 2 minutes, so a batch system's warning that
// arrives during a restart still gets its checkpoint. Its output goes to our stderr.
[[noreturn]] void checkpoint_until_ready() {
  unsetenv("LD_PRELOAD");  // revive's own process, not part of the computation
  std::string port = std::to_string(g_target.port);
  for (int attempt = 0;; ++attempt) {
    int p[2];
    if (pipe(p) != 0) _exit(1);
    pid_t c = fork();
    if (c == 0) {
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[0]);
      close(p[1]);
      execl("/proc/self/exe", "revive", "checkpoint", "--port", port.c_str(), "--ckpt-dir", g_target.ckpt_dir.c_str(),
            static_cast<char*>(nullptr));
      fprintf(stderr, "revive: exec /proc/self/exe checkpoint: %s\n", strerror(errno));
      _exit(127);
    }
    close(p[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = read(p[0], buf, sizeof buf)) != 0;)
      if (n > 0) out.append(buf, size_t(n));
      else if (errno != EINTR) break;
    close(p[0]);
    int st = 0;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR) {
    }
    // "Not now" (no coordinator yet, a restart in progress, no process connected yet): ask again.
    const bool not_ready = WIFEXITED(st) && WEXITSTATUS(st) == kCheckpointNotNow;
    if (not_ready && attempt < 240) {
      usleep(500000);
      continue;
    }
    if (write(2, out.data(), out.size()) < 0) {
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
  }
}

void on_forwarded(int sig) {
  if (g_forward > 0) kill(g_forward, sig);
}

void handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the wait returns EINTR and serves the request
  sigaction(sig, &sa, nullptr);
}

int g_sig;

}  // namespace

Status ParseCheckpointSignal(const std::string& name, int* sig) {
  *sig = 0;
  if (name.empty()) return Status::OK();
  std::string n = name;
  if (n.rfind("SIG", 0) == 0) n = n.substr(3);
  char* end = nullptr;
  long v = strtol(n.c_str(), &end, 10);
  if (!n.empty() && end != nullptr && *end == 0) {
    *sig = int(v);
  } else {
    for (int s = 1; s < NSIG; s++) {
      const char* abbrev = sigabbrev_np(s);
      if (abbrev != nullptr && n == abbrev) *sig = s;
    }
  }
  if (*sig <= 0 || *sig >= NSIG || *sig == SIGKILL || *sig == SIGSTOP || *sig == SIGCHLD)
    return Status::InvalidArgument("--checkpoint-signal " + name + ": not a signal revive can take (e.g. USR1)");
  return Status::OK();
}

void ArmCheckpointSignal(int sig, const Target& t) {
  if (sig <= 0) return;
  g_sig = sig;
  g_target = t;
  handle(sig, on_checkpoint_signal);
}

void ForwardSignalsTo(pid_t pid) {
  g_forward = pid;
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    if (s != g_sig) handle(s, on_forwarded);
}

void ServeCheckpointSignal() {
  for (size_t i = 0; i < g_checkpointers.size();) {
    if (waitpid(g_checkpointers[i], nullptr, WNOHANG) == g_checkpointers[i]) {
      g_checkpointers.erase(g_checkpointers.begin() + long(i));
    } else {
      i++;
    }
  }
  while (g_requests > 0) {
    g_requests = g_requests - 1;
    pid_t p = fork();
    if (p < 0) {
      fprintf(stderr, "revive: cannot start a checkpoint for the signal: %s\n", strerror(errno));
      return;
    }
    if (p == 0) {
      // Default dispositions: the signals revive takes or passes on are not this child's business.
      for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) signal(s, SIG_DFL);
      checkpoint_until_ready();
    }
    g_checkpointers.push_back(p);
  }
}

bool FailFast() {
  const char* v = getenv("REVIVE_FAIL_FAST");
  return v != nullptr && strcmp(v, "1") == 0;
}

namespace {
int CodeOf(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1; }
}  // namespace

std::vector<int> WaitEachServing(const std::vector<pid_t>& kids, const std::function<void(size_t, int)>& ended) {
  std::vector<int> codes(kids.size(), 0);
  std::vector<bool> done(kids.size(), false);
  const bool fail_fast = FailFast();
  size_t left = kids.size();
  // In the order they end (every 20 ms, or sooner when a signal cuts the sleep short): a checkpoint signal
  // is served while waiting, and a failure is seen while the others still run.
  while (left > 0) {
    if (g_sig != 0) ServeCheckpointSignal();
    bool any = false;
    for (size_t k = 0; k < kids.size(); k++) {
      if (done[k]) continue;
      int st = 0;
      pid_t r = waitpid(kids[k], &st, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      done[k] = true;
      any = true;
      left--;
      codes[k] = r == kids[k] ? CodeOf(st) : 1;
      if (ended) ended(k, codes[k]);
      if (fail_fast && codes[k] != 0 && left > 0) {
        for (size_t j = 0; j < kids.size(); j++)
          if (!done[j]) kill(kids[j], SIGKILL);
      }
    }
    if (!any && left > 0) {
      // Nothing to serve: sleep until any child ends, without reaping it (a kid is reaped above; a
      // `revive checkpoint` child by ServeCheckpointSignal). Any kid, not the first: a restorer that dies
      // while the others wait at the restart barrier must be seen (`ended` tells the coordinator). A
      // checkpoint child already ended and not yet reaped, or a signal, falls back to the 20 ms poll.
      siginfo_t si{};
      bool kid = false;
      if (g_sig == 0 && !fail_fast && waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) == 0)
        for (pid_t p : kids) kid |= p == si.si_pid;
      if (!kid) usleep(20000);
    }
  }
  // The program is gone: a checkpoint asked for by a signal has nothing left to save (one still waiting for
  // the computation to be ready would wait for nothing).
  for (pid_t p : g_checkpointers) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
  g_checkpointers.clear();
  return codes;
}

}  // namespace revive::cli
