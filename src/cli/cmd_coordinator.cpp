// `revive coordinator`: runs the coordinator in the foreground or as a daemon.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "coord/server.h"
#include "launch/user_record.h"
#include "launch/coord_record.h"

namespace revive::cli {
namespace {

coord::Server* g_server = nullptr;  // for the signal handler only

void OnTerm(int) {
  if (g_server != nullptr) g_server->Stop();  // eventfd write: async-signal-safe
}

struct CoordArgs {
  std::string port, ckpt_dir, bind = "127.0.0.1", restart_manifest, parent;
  double interval = 0, phase_timeout = 600;
  bool phase_timeout_given = false;
  bool exit_on_last = false, daemon = false, compress = false, no_compress = false, fork = false;
};

// Writes a message into the readiness pipe (daemon) or stderr (foreground).
void Report(int fd, const std::string& msg) {
  if (fd >= 0) (void)!write(fd, msg.data(), msg.size());
  else fprintf(stderr, "%s\n", msg.c_str());
}

int Serve(const CoordArgs& a, int ready_fd) {
  Target t;
  Status s = ResolveTarget(a.port, a.ckpt_dir, &t);
  coord::ServerOptions o;
  o.bind = a.bind;
  o.port = t.port;
  o.ckpt_dir = t.ckpt_dir;
  o.secret_file = t.secret_file;
  o.interval = a.interval;
  o.phase_timeout = a.phase_timeout;
  // `revive run --hang-timeout` reaches the coordinators that launch/restart start (and their hosts'
  // sub-coordinators) through the environment; --phase-timeout still wins.
  if (!a.phase_timeout_given && getenv("REVIVE_PHASE_TIMEOUT") != nullptr) {
    char* end = nullptr;
    double v = strtod(getenv("REVIVE_PHASE_TIMEOUT"), &end);
    if (end == getenv("REVIVE_PHASE_TIMEOUT") || *end != '\0' || !(v > 0)) {
      Report(ready_fd, std::string("revive coordinator: REVIVE_PHASE_TIMEOUT=") + getenv("REVIVE_PHASE_TIMEOUT") +
                           ": not a positive number of seconds");
      return 1;
    }
    o.phase_timeout = v;
  }
  o.exit_on_last = a.exit_on_last;
  // Off by default: on this class of machine zstd is slower than the disk (docs/performance.md).
  o.compress = a.compress && !a.no_compress;
  o.fork = a.fork;
  o.restart_manifest = a.restart_manifest;
  o.parent = a.parent;
  auto server = std::make_unique<coord::Server>(o);
  if (s.ok()) s = server->Start();
  if (!s.ok()) {
    Report(ready_fd, "revive coordinator: " + s.message());
    return 1;
  }
  // So that `revive status` can say "coordinator lost" when this process dies without shutting down, and
  // commands given only --ckpt-dir find the port (cli PreferRecordedPort): written before the launch
  // that started us hears we are ready, so a second launch it lets in finds it.
  launch::WriteCoordRecord(o.ckpt_dir, server->port(), o.bind, o.parent);
  if (ready_fd >= 0) {
    Report(ready_fd, "ok");
    close(ready_fd);
  } else if (isatty(2)) {
    fprintf(stderr, "revive coordinator: listening on %s:%u, checkpoint directory %s\n", o.bind.c_str(),
            server->port(), o.ckpt_dir.c_str());
  }
  // So that `revive checkpoint/status/kill --port P` find the secret without --ckpt-dir (this user only).
  launch::WriteUserRecord(server->port(), o.ckpt_dir);
  g_server = server.get();
  struct sigaction sa = {};
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  s = server->Run();
  g_server = nullptr;
  launch::RemoveCoordRecord(o.ckpt_dir, server->port());
  launch::RemoveUserRecord(server->port(), o.ckpt_dir);
  if (!s.ok()) {
    fprintf(stderr, "revive coordinator: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

// Double fork + setsid so the coordinator outlives the launching shell and has no terminal. The
// foreground process waits on a pipe until the coordinator listens (or says why it cannot), so callers
// can rely on "exit 0 = ready".
int Daemonize(const CoordArgs& a) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    perror("revive coordinator: pipe");
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("revive coordinator: fork");
    return 1;
  }
  if (pid > 0) {
    close(p[1]);
    std::string msg = ReadAll(p[0]);
    if (msg == "ok") return 0;
    fprintf(stderr, "%s\n", msg.empty() ? "revive coordinator: daemon died while starting" : msg.c_str());
    return 1;
  }
  close(p[0]);
  setsid();
  if (fork() != 0) _exit(0);
  // What the coordinator says (failed generations, dropped peers, retries) goes to
  // <ckpt-dir>/coordinator.log, where an operator looks after a bad night; nothing to the terminal.
  int log_fd = -1;
  Target t;
  if (ResolveTarget(a.port, a.ckpt_dir, &t).ok()) {
    (void)!mkdir(t.ckpt_dir.c_str(), 0700);
    log_fd = open((t.ckpt_dir + "/coordinator.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(log_fd >= 0 ? log_fd : null, 2);
    if (null > 2) close(null);
  }
  if (log_fd > 2) close(log_fd);
  if (chdir("/") != 0) {
  }
  _exit(Serve(a, p[1]));
}

}  // namespace

void AddCoordinatorCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<CoordArgs>();
  CLI::App* c = app.add_subcommand("coordinator", "Run a coordinator (launch and restart start one for you)");
  c->add_option("--port", a->port, "TCP port (default: REVIVE_PORT or 7779)");
  c->add_option("--ckpt-dir", a->ckpt_dir, "Checkpoint directory (default: REVIVE_CKPT_DIR or ./revive-ckpt)");
  c->add_option("--bind", a->bind, "Address to listen on (default 127.0.0.1; 0.0.0.0 for all)");
  c->add_option("--interval", a->interval, "Checkpoint every SECONDS (0 = only on request)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--phase-timeout", a->phase_timeout,
                "A process silent this many seconds in a checkpoint phase fails the generation "
                "(default: REVIVE_PHASE_TIMEOUT or 600)")
      ->check(CLI::PositiveNumber)
      ->each([a](const std::string&) { a->phase_timeout_given = true; });
  c->add_flag("--exit-on-last", a->exit_on_last, "Exit when the last process has said BYE or disconnected");
  c->add_flag("--daemon", a->daemon, "Detach (double fork, setsid) and write nothing to the terminal");
  c->add_flag("--compress", a->compress, "Tell processes to compress images with zstd (default: off)");
  c->add_flag("--no-compress", a->no_compress, "Tell processes not to compress images (the default)");
  c->add_flag("--fork", a->fork, "Tell processes to write images from a forked child");
  c->add_option("--parent", a->parent,
                "HOST:PORT of the root coordinator: run as a sub-coordinator for this node's processes "
                "(same secret; the root assigns upids and writes the manifest)");
  c->add_option("--restart-manifest", a->restart_manifest,
                "MANIFEST.json listing the processes a restart waits for (default: newest generation)");
  c->callback([a, rc] { *rc = a->daemon ? Daemonize(*a) : Serve(*a, -1); });
}

}  // namespace revive::cli
