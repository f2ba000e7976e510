// `revive restart [--lazy] IMAGE-OR-CKPT-DIR`: bring a computation back from its newest complete generation.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/paths.h"
#include "coord/manifest.h"
#include "coord/secret.h"
#include "core/env.h"
#include "plugins/proctree/tree.h"
#include "launch/hostlist.h"
#include "launch/launcher.h"

namespace revive::cli {
namespace {

struct RestartArgs {
  std::string port, what;
  bool lazy = false;
  std::string hosts, hostfile, launcher;  // placement (migration): docs/hosts.md
};

struct Plan {
  std::string ckpt_dir;
  std::string manifest;             // "" when restoring a single image
  std::vector<std::string> images;  // absolute
  std::vector<uint64_t> upids;      // of each image (0 = unknown)
};

// "<prog>-<upid>.rimg" -> upid (contracts.md layout); 0 if the name does not follow it.
uint64_t UpidFromImageName(const std::string& path) {
  size_t dash = path.find_last_of('-'), dot = path.rfind(".rimg");
  if (dash == std::string::npos || dot == std::string::npos || dot <= dash + 1) return 0;
  uint64_t u = 0;
  for (size_t i = dash + 1; i < dot; i++) {
    if (path[i] < '0' || path[i] > '9') return 0;
    u = u * 10 + (uint64_t)(path[i] - '0');
  }
  return u;
}

// A restored copy next to a still-running original would be two processes with one identity: refuse
// while the coordinator still has any of the images' processes.
Status CheckNotRunning(const Target& t, const Plan& plan) {
  ScopedClient sc;
  Status s = ConnectCli(t, 2000, &sc.c);
  if (!s.ok()) return s;
  coord::FrameBuilder b(sc.c.tx_buffer(), coord::Client::kTxCap, coord::kStatusRequest, sc.c.next_seq());
  coord::FrameHeader h;
  coord::Payload p;
  if (!sc.c.send(b) || sc.c.recv(&h, &p, 10000) != 1) return Status::IOError(sc.c.error());
  for (size_t i = 0;; i++) {
    std::string pre = "p." + std::to_string(i) + ".";
    uint64_t upid = 0, pid = 0;
    if (!p.get_u64((pre + "upid").c_str(), &upid)) break;
    p.get_u64((pre + "pid").c_str(), &pid);
    char host[256] = "?";
    p.get_str((pre + "host").c_str(), host, sizeof host);
    for (uint64_t want : plan.upids)
      if (want != 0 && want == upid)
        return Status::InvalidArgument("process upid " + std::to_string(upid) + " is still running (pid " +
                                       std::to_string(pid) + " on " + host +
                                       "); stop the computation first (revive kill)");
  }
  return Status::OK();
}

std::string Parent(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == 0 ? "/" : p.substr(0, s);
}

bool IsFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// IMAGE.rimg, a generation directory (ckpt-G with MANIFEST.json) or a checkpoint directory.
Status MakePlan(const std::string& what, Plan* plan) {
  std::string path = Absolute(what);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Status::FromErrno(path, errno);
  if (S_ISREG(st.st_mode)) {  // <ckpt-dir>/ckpt-G/prog-upid.rimg
    plan->images = {path};
    plan->upids = {UpidFromImageName(path)};
    plan->ckpt_dir = Parent(Parent(path));
    return Status::OK();
  }
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": neither an image nor a directory");
  std::string gen_dir;
  if (IsFile(path + "/MANIFEST.json")) {
    gen_dir = path;
    plan->ckpt_dir = Parent(path);
  } else {
    uint64_t g = 0;
    Status s = coord::FindNewestGeneration(Env::Default(), path, &g, nullptr);
    if (!s.ok()) return s;
    gen_dir = coord::GenerationDir(path, g);
    plan->ckpt_dir = path;
  }
  plan->manifest = gen_dir + "/MANIFEST.json";
  coord::Manifest m;
  Status s = coord::ReadManifest(Env::Default(), plan->manifest, &m);
  if (!s.ok()) return s;
  for (const auto& p : m.procs) {
    std::string image = gen_dir + "/" + p.image;
    if (!IsFile(image))
      return Status::NotFound(plan->manifest + " lists " + p.image + " (upid " + std::to_string(p.upid) +
                              "), but " + image + " is missing");
    plan->images.push_back(image);
    plan->upids.push_back(p.upid);
  }
  return Status::OK();
}

int Fail(const std::string& msg, int code = 2) {
  fprintf(stderr, "revive restart: %s\n", msg.c_str());
  return code;
}

// With --hosts/--hostfile, each image's command line goes through the launcher onto its host; the command
// carries its environment itself (`env K=V ...`: ssh and srun do not forward ours) and REVIVE_HOST_ID
// so the manifest of the next generation records where the process now runs. Empty: run locally.
Status PlaceImages(const RestartArgs& a, const Target& t, const std::string& bin, const Plan& plan,
                   std::vector<std::vector<std::string>>* cmds) {
  if (a.hosts.empty() && a.hostfile.empty() && a.launcher.empty()) return Status::OK();
  if (!a.hosts.empty() && !a.hostfile.empty()) return Status::InvalidArgument("--hosts and --hostfile contradict each other");
  std::vector<std::string> hosts;
  Status s = !a.hosts.empty() ? launch::ParseHostList(a.hosts, &hosts)
             : !a.hostfile.empty() ? launch::ReadHostFile(a.hostfile, &hosts) : Status::OK();
  if (!s.ok()) return s;
  if (hosts.empty()) hosts = {""};  // --launcher alone: same template for every image, no host
  std::string tmpl = launch::ResolveTemplate(a.launcher.empty() ? "ssh" : a.launcher);
  std::vector<std::string> placed = launch::Place(hosts, plan.images.size());
  for (size_t i = 0; i < plan.images.size(); i++) {
    std::vector<std::string> cmd = {"env", "REVIVE_COORD_HOST=" + t.host, "REVIVE_COORD_PORT=" + std::to_string(t.port),
                                    "REVIVE_SECRET_FILE=" + t.secret_file, "REVIVE_CKPT_DIR=" + t.ckpt_dir};
    if (!placed[i].empty()) cmd.push_back("REVIVE_HOST_ID=" + placed[i]);
    for (const char* k : {"REVIVE_LOG", "REVIVE_SIGNAL"})
      if (const char* v = getenv(k)) cmd.push_back(std::string(k) + "=" + v);
    cmd.push_back(bin);
    if (a.lazy) cmd.push_back("--lazy");
    cmd.push_back(plan.images[i]);
    std::vector<std::string> argv;
    s = launch::Expand(tmpl, placed[i], cmd, &argv);
    if (!s.ok()) return s;
    cmds->push_back(std::move(argv));
  }
  return Status::OK();
}

int Restart(const RestartArgs& a) {
  Plan plan;
  Status s = MakePlan(a.what, &plan);
  if (!s.ok()) return Fail(s.message());
  std::string bin;
  s = FindHelper("REVIVE_RESTART_BIN", "restart", "revive-restart", &bin);
  if (!s.ok()) return Fail(s.message());
  Target t;
  s = ResolveTarget(a.port, plan.ckpt_dir, &t);
  if (!s.ok()) return Fail(s.message());
  std::string secret;
  s = coord::LoadOrCreateSecret(t.secret_file, &secret);
  if (!s.ok()) return Fail(s.message());
  std::vector<std::string> extra;
  if (!plan.manifest.empty()) extra = {"--restart-manifest", plan.manifest};
  s = EnsureCoordinator(t, extra);
  if (!s.ok()) return Fail(s.message());
  s = CheckNotRunning(t, plan);
  if (!s.ok()) return Fail(s.message());
  std::vector<std::vector<std::string>> remote;
  s = PlaceImages(a, t, bin, plan, &remote);
  if (!s.ok()) return Fail(s.message());

  Progress("revive: restoring " + std::to_string(plan.images.size()) + " process(es) from " +
           (plan.manifest.empty() ? plan.images[0] : plan.manifest));
  std::vector<pid_t> kids;
  auto exec_image = [&](size_t k) {
    const std::string& image = plan.images[k];
    setenv("REVIVE_COORD_HOST", t.host.c_str(), 1);
    setenv("REVIVE_COORD_PORT", std::to_string(t.port).c_str(), 1);
    setenv("REVIVE_SECRET_FILE", t.secret_file.c_str(), 1);
    setenv("REVIVE_CKPT_DIR", t.ckpt_dir.c_str(), 1);
    signal(SIGPIPE, SIG_DFL);
    if (!remote.empty()) {
      std::vector<char*> rargv;
      for (auto& w : remote[k]) rargv.push_back(w.data());
      rargv.push_back(nullptr);
      execvp(rargv[0], rargv.data());
      fprintf(stderr, "revive restart: launcher %s: %s\n", rargv[0], strerror(errno));
      _exit(127);
    }
    std::vector<const char*> argv = {bin.c_str()};
    if (a.lazy) argv.push_back("--lazy");
    argv.push_back(image.c_str());
    argv.push_back(nullptr);
    execv(bin.c_str(), const_cast<char* const*>(argv.data()));
    fprintf(stderr, "revive restart: exec %s: %s\n", bin.c_str(), strerror(errno));
    _exit(127);
  };
  std::vector<size_t> which;  // image index of each of kids
  if (remote.empty()) {
    // Locally: as the recorded process tree, pids included (docs/process-trees.md); we wait for its roots.
    s = proctree::StartRestorers(plan.images, exec_image, &kids, &which);
    if (!s.ok()) return Fail(s.message());
  } else {
    for (size_t k = 0; k < plan.images.size(); k++) {
      pid_t pid = fork();
      if (pid < 0) return Fail(std::string("fork: ") + strerror(errno), 1);
      if (pid == 0) exec_image(k);
      kids.push_back(pid);
    }
  }
  // Exit status: the first process (manifest order) that did not exit 0, else 0. Signals as 128+sig.
  std::vector<int> codes(kids.size(), 0);
  for (size_t i = 0; i < kids.size(); i++) {
    int st = 0;
    while (waitpid(kids[i], &st, 0) < 0 && errno == EINTR) {
    }
    codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
  }
  for (int c : codes)
    if (c != 0) return c;
  return 0;
}

}  // namespace

void AddRestartCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<RestartArgs>();
  CLI::App* c = app.add_subcommand("restart", "Restore a computation from its newest complete checkpoint");
  c->footer(
      "Restores a computation: from a checkpoint directory (its newest complete generation, the highest\n"
      "ckpt-G with a MANIFEST.json), one generation directory, or a single IMAGE.rimg. Starts a\n"
      "coordinator if none answers, runs revive-restart for every image and returns the exit status of\n"
      "the restored program (128+N if killed by signal N).");
  c->add_option("--port", a->port, "Coordinator port (default: REVIVE_PORT or 7779)");
  c->add_flag("--lazy", a->lazy, "Map image pages on demand instead of reading them (uncompressed images)");
  c->add_option("--hosts", a->hosts, "Comma-separated hosts; process i (manifest order) goes to host i mod n");
  c->add_option("--hostfile", a->hostfile, "File with one host per line (`host slots=N` repeats it)");
  c->add_option("--launcher", a->launcher,
                "How to run a process on a host: ssh (default with --hosts), netns, local, or a template "
                "such as 'ip netns exec {host} {cmd}' or 'ssh {host} {cmdq}' (docs/hosts.md)");
  c->add_option("what", a->what, "IMAGE.rimg, ckpt-G directory or checkpoint directory")->required();
  c->callback([a, rc] { *rc = Restart(*a); });
}

}  // namespace revive::cli
