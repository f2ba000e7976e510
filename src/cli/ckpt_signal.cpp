#include "cli/ckpt_signal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

namespace revive::cli {
namespace {

volatile sig_atomic_t g_requests;  // signals seen, not yet served
volatile pid_t g_forward;          // where forwarded signals go
Target g_target;
std::vector<pid_t> g_checkpointers;  // `revive checkpoint` children still running

void on_checkpoint_signal(int) { g_requests = g_requests + 1; }

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
      unsetenv("LD_PRELOAD");  // revive's own process, not part of the computation
      dup2(2, 1);              // what it prints (the generation's directory) is not the program's output
      std::string port = std::to_string(g_target.port);
      execl("/proc/self/exe", "revive", "checkpoint", "--port", port.c_str(), "--ckpt-dir",
            g_target.ckpt_dir.c_str(), static_cast<char*>(nullptr));
      fprintf(stderr, "revive: exec /proc/self/exe checkpoint: %s\n", strerror(errno));
      _exit(127);
    }
    g_checkpointers.push_back(p);
  }
}

std::vector<int> WaitEachServing(const std::vector<pid_t>& kids) {
  std::vector<int> codes;
  for (pid_t k : kids) {
    int st = 0;
    if (g_sig == 0) {
      while (waitpid(k, &st, 0) < 0 && errno == EINTR) {
      }
    } else {
      // A signal may come between a look at the requests and a blocking wait, and would then wait for
      // the next one: look every 20 ms instead (the signal also cuts the sleep short).
      for (;;) {
        ServeCheckpointSignal();
        pid_t r = waitpid(k, &st, WNOHANG);
        if (r == k || (r < 0 && errno != EINTR)) break;
        usleep(20000);
      }
    }
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1);
  }
  for (pid_t p : g_checkpointers) waitpid(p, nullptr, 0);  // a checkpoint under way ends first
  g_checkpointers.clear();
  return codes;
}

}  // namespace revive::cli
