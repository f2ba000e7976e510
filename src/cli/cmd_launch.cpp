// `revive launch [options] -- PROG ARGS`: run a program with the injected library and a coordinator.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/paths.h"
#include "coord/secret.h"
#include "core/env.h"

namespace revive::cli {
namespace {

struct LaunchArgs {
  std::string port, ckpt_dir;
  double interval = 0;
  bool compress = false, no_compress = false, fork = false;
  std::vector<std::string> argv;
};

int Fail(const std::string& msg, int code = 2) {
  fprintf(stderr, "revive launch: %s\n", msg.c_str());
  return code;
}

int Launch(const LaunchArgs& a) {
  if (a.argv.empty()) return Fail("no program given (usage: revive launch [options] -- PROG ARGS...)");
  if (a.compress && a.no_compress) return Fail("--compress and --no-compress contradict each other");
  Target t;
  Status s = ResolveTarget(a.port, a.ckpt_dir, &t);
  if (!s.ok()) return Fail(s.message());

  std::string prog;
  s = FindProgram(a.argv[0], &prog);
  if (!s.ok()) return Fail(s.message(), s.IsNotFound() ? 127 : 126);  // the shell's convention
  bool dynamic = false;
  s = IsDynamicElf(prog, &dynamic);
  if (!s.ok()) return Fail(s.message());
  if (!dynamic)
    return Fail(prog + " is statically linked (no PT_INTERP): the checkpoint library cannot be preloaded "
                       "into it. Rebuild it dynamically linked.");
  std::string lib;
  s = FindHelper("REVIVE_INJECT_LIB", "inject", "librevive_inject.so", &lib);
  if (!s.ok()) return Fail(s.message());

  s = CreateDirs(Env::Default(), t.ckpt_dir);
  if (!s.ok()) return Fail("checkpoint directory: " + s.message());
  std::string secret;
  s = coord::LoadOrCreateSecret(t.secret_file, &secret);
  if (!s.ok()) return Fail(s.message());

  std::vector<std::string> extra;
  if (a.interval > 0) extra = {"--interval", std::to_string(a.interval)};
  if (a.compress) extra.push_back("--compress");
  if (a.fork) extra.push_back("--fork");
  s = EnsureCoordinator(t, extra);
  if (!s.ok()) return Fail(s.message());

  std::string preload = lib;
  const char* old = getenv("LD_PRELOAD");
  if (old != nullptr && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("REVIVE_COORD_HOST", t.host.c_str(), 1);
  setenv("REVIVE_COORD_PORT", std::to_string(t.port).c_str(), 1);
  setenv("REVIVE_SECRET_FILE", t.secret_file.c_str(), 1);
  setenv("REVIVE_CKPT_DIR", t.ckpt_dir.c_str(), 1);
  setenv("REVIVE_COMPRESS", a.compress ? "1" : "0", 1);
  setenv("REVIVE_FORK", a.fork ? "1" : "0", 1);
  if (getenv("REVIVE_LOG") == nullptr) setenv("REVIVE_LOG", "1", 1);
  // REVIVE_SIGNAL passes through unchanged when the user set it.

  std::vector<char*> argv;
  for (const auto& s2 : a.argv) argv.push_back(const_cast<char*>(s2.c_str()));
  argv.push_back(nullptr);
  signal(SIGPIPE, SIG_DFL);  // the program gets the dispositions it would have had without revive
  execv(prog.c_str(), argv.data());
  return Fail("exec " + prog + ": " + strerror(errno), 126);
}

}  // namespace

void AddLaunchCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<LaunchArgs>();
  CLI::App* c = app.add_subcommand("launch", "Run a program under checkpoint control");
  c->footer(
      "Runs PROG under checkpoint control: starts a coordinator if none answers on the port, creates the\n"
      "checkpoint directory, preloads librevive_inject.so and execs PROG (its exit status is ours).\n"
      "Statically linked programs are refused.\nExample: revive launch --ckpt-dir /scratch/ck -- ./sim input.dat");
  c->add_option("--port", a->port, "Coordinator port (default: REVIVE_PORT or 7779)");
  c->add_option("--ckpt-dir", a->ckpt_dir, "Checkpoint directory (default: REVIVE_CKPT_DIR or ./revive-ckpt)");
  c->add_option("--interval", a->interval, "Checkpoint automatically every SECONDS (new coordinator only)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--compress", a->compress, "Compress images with zstd, multi-threaded (default: off, for speed)");
  c->add_flag("--no-compress", a->no_compress, "Write images uncompressed (the default; needed for restart --lazy)");
  c->add_flag("--fork", a->fork, "Write images from a forked child so the program resumes sooner");
  c->add_option("prog", a->argv, "-- PROG ARGS...: the program and its arguments")->required();
  c->positionals_at_end();
  c->callback([a, rc] { *rc = Launch(*a); });
}

}  // namespace revive::cli
