// `revive restart [--lazy] IMAGE-OR-CKPT-DIR`: bring a computation back from its newest complete generation.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "cli/below_watch.h"
#include "cli/ckpt_signal.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/paths.h"
#include "cli/inspect_files.h"
#include "cli/preimages.h"
#include "coord/manifest.h"
#include "coord/secret.h"
#include "core/env.h"
#include "cli/hosts.h"
#include "cli/lazy_verify.h"
#include "cli/tlevels_restart.h"
#include "launch/hostlist.h"
#include "launch/placement.h"
#include "plugins/proctree/tree.h"

namespace revive::cli {
namespace {

struct RestartArgs {
  std::string port, what;
  bool lazy = false;
  bool fork = false;        // --fork: the restored computation's checkpoints are written by forked children
  bool ib2tcp = false;      // --ib2tcp: verbs programs continue over TCP (REVIVE_IB2TCP=1, docs/verbs.md)
  HostOpts ho;              // placement (migration): docs/hosts.md
  std::string map;          // --map UPID=HOST,...: pins trees
  std::string only;         // --only UPID,...: this host's part of the manifest
  std::string parent;       // --parent HOST:PORT: run this part behind a new sub-coordinator of that root
  std::string status_file;  // --status-file F: report each root's status by manifest index (a host's part)
  std::string ckpt_signal;  // --checkpoint-signal SIG (or REVIVE_CHECKPOINT_SIGNAL): ckpt_signal.h
  std::string levels;       // --levels SPEC: REVIVE_LEVELS (images kept on the hosts)
  std::string local_dir;    // --local-dir D: this host's node-local generation directory (a host's part)
  std::string pre_hosts;    // --pre-hosts SPEC: the pre-images this host's part puts back (preimages.h)
};

struct Plan {
  std::string ckpt_dir;
  std::string manifest;             // "" when restoring a single image
  std::vector<std::string> images;  // absolute
  std::vector<uint64_t> upids;      // of each image (0 = unknown)
  std::vector<size_t> pos;          // of each image: its index in the manifest (kept by --only)
  coord::Manifest man;              // the manifest read (images kept on hosts: ResolveImages)
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

// The coordinator's STATUS reply into *p (valid while sc lives).
Status QueryStatus(const Target& t, int connect_ms, int reply_ms, ScopedClient* sc, coord::Payload* p) {
  Status s = ConnectCli(t, connect_ms, &sc->c);
  if (!s.ok()) return s;
  coord::FrameBuilder b(sc->c.tx_buffer(), coord::Client::kTxCap, coord::kStatusRequest, sc->c.next_seq());
  coord::FrameHeader h;
  if (!sc->c.send(b) || sc->c.recv(&h, p, reply_ms) != 1) return Status::IOError(sc->c.error());
  return Status::OK();
}

// After the restored roots ended badly: if a process could not be restored, its report ended the others
// through the coordinator, which still knows why (best effort: it may have left already).
void SayRestartFailure(const Target& t) {
  ScopedClient sc;
  coord::Payload p;
  if (!QueryStatus(t, 1000, 2000, &sc, &p).ok()) return;
  char why[1024] = "";
  if (p.get_str("restart_failed", why, sizeof why) && why[0])
    fprintf(stderr, "revive restart: the restart was ended: %s\n", why);
}

// A restored process's restorer (a root we wait for) ended badly: if it ended before it was back (killed,
// or crashed while reading its image, with no report), the coordinator would wait for it: for ever at the
// restart barrier, or 30 s for a failed restart's latecomer (and a retry with it). Tell the coordinator,
// which decides by its state (coord/server.cpp, kKill with gone=1): a process that came back and then
// exited is nobody's business. Best effort: no coordinator, nothing to tell. code < 0: a process that is not
// our child (below a tree's root, BelowWatch): its status is its parent's to read.
void TellEnded(const Target& t, uint64_t upid, pid_t pid, int code) {
  ScopedClient sc;
  if (!ConnectCli(t, 1000, &sc.c).ok()) return;
  std::string why = "process upid " + std::to_string(upid) + " (pid " + std::to_string(pid) + ") ended " +
                    (code < 0     ? std::string("(below the tree's root: its status went to its parent)")
                     : code > 128 ? "by signal " + std::to_string(code - 128)
                                  : "with status " + std::to_string(code)) +
                    " before it was restored";
  coord::FrameBuilder k(sc.c.tx_buffer(), coord::Client::kTxCap, coord::kKill, sc.c.next_seq());
  k.add_u64("upid", upid).add("why", why.c_str()).add("gone", "1");
  coord::FrameHeader h;
  coord::Payload p;
  if (sc.c.send(k)) sc.c.recv(&h, &p, 5000);
}

// A coordinator on our port still ending a failed restart (a retry at once after it) tells that restart's
// processes still reading their images to exit when they come: it would take ours for them. Wait while
// it does: until it leaves (an --exit-on-last one leaves once none can come and it has said why), or,
// one that stays, until none can come. Bounded by its grace for latecomers (30 s, coord/server.cpp).
void WaitForFailedRestart(const Target& t) {
  bool said = false;
  for (int i = 0; i < 400 && Listening(t); i++) {
    ScopedClient sc;
    coord::Payload p;
    if (!QueryStatus(t, 1000, 2000, &sc, &p).ok()) return;
    const char* v;
    size_t n;
    auto is1 = [&](const char* key) { return p.get(key, &v, &n) && n == 1 && v[0] == '1'; };
    if (!p.get("restart_failed", &v, &n) || n == 0 || !(is1("restart_failed_open") || is1("restart_ends"))) return;
    if (!said)
      Progress("revive restart: the coordinator on port " + std::to_string(t.port) +
               " is ending a failed restart; waiting for it");
    said = true;
    usleep(100000);
  }
}

// A restored copy next to a still-running original would be two processes with one identity: refuse
// while the coordinator still has any of the images' processes.
Status CheckNotRunning(const Target& t, const Plan& plan) {
  ScopedClient sc;
  coord::Payload p;
  Status s = QueryStatus(t, 2000, 10000, &sc, &p);
  if (!s.ok()) return s;
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
    plan->pos = {0};
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
    if (!p.local && !IsFile(image))  // images kept on hosts: found by ResolveImages
      return Status::NotFound(plan->manifest + " lists " + p.image + " (upid " + std::to_string(p.upid) +
                              "), but " + image + " is missing");
    plan->pos.push_back(plan->images.size());
    plan->images.push_back(image);
    plan->upids.push_back(p.upid);
  }
  plan->man = m;
  return Status::OK();
}

// Images kept on the hosts (REVIVE_LEVELS): each from the first intact place (checksum of the manifest).
Status ResolveImages(const std::string& local_dir, Plan* plan) {
  const std::string gen_dir = Parent(plan->manifest);
  for (size_t i = 0; i < plan->images.size(); i++) {
    const coord::ManifestProc& p = plan->man.procs[plan->pos[i]];
    if (!p.local) continue;
    Status s = ResolveKeptImage(plan->man, p, gen_dir, local_dir, &plan->images[i]);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

int Fail(const std::string& msg, int code = 2) {
  fprintf(stderr, "revive restart: %s\n", msg.c_str());
  return code;
}

// --only: keep the listed processes of the plan (errors name an upid the manifest lacks).
Status KeepOnly(const std::string& list, Plan* plan) {
  Plan kept = *plan;
  kept.images.clear();
  kept.upids.clear();
  kept.pos.clear();
  for (const std::string& w : launch::SplitCommas(list)) {
    char* end = nullptr;
    uint64_t upid = strtoull(w.c_str(), &end, 10);
    size_t i = 0;
    while (i < plan->upids.size() && (upid == 0 || plan->upids[i] != upid)) i++;
    if (w.empty() || *end != '\0' || i == plan->upids.size())
      return Status::InvalidArgument("--only " + list + ": \"" + w + "\" is not the upid of a process in " +
                                     (plan->manifest.empty() ? plan->images[0] : plan->manifest));
    kept.images.push_back(plan->images[i]);
    kept.upids.push_back(upid);
    kept.pos.push_back(plan->pos[i]);
  }
  *plan = kept;
  return Status::OK();
}

// --hosts/--hostfile/--map: whole process trees go to hosts; each host's part is `revive restart --only
// <its upids>` run there through the launcher, which rebuilds its trees with the recorded pids
// (tree_*.cpp). The root coordinator runs here; with more than one host each part starts a
// sub-coordinator on its host. Decided before any coordinator starts, so a bad placement leaves nothing behind.
Status PlanParts(const RestartArgs& a, const Plan& plan, std::vector<HostPart>* parts) {
  std::vector<std::string> hosts;
  Status s = WantsHosts(a.ho) ? ResolveHosts(a.ho, &hosts) : Status::OK();
  std::map<uint64_t, std::string> pins;
  if (s.ok() && !a.map.empty()) s = launch::ParseMap(a.map, &pins);
  if (!s.ok()) return s;
  std::vector<launch::PlaceProc> procs(plan.images.size());
  proctree::TreePlan tree;
  s = proctree::PlanTree(plan.images, &tree);
  if (!s.ok() && !s.IsNotFound()) return s;
  for (size_t i = 0; i < procs.size(); i++) {
    procs[i].upid = plan.upids[i];
    procs[i].parent = s.ok() ? tree.procs[i].parent : -1;  // no proctree sections: independent processes
  }
  std::vector<std::string> placed;
  s = launch::PlaceTrees(procs, hosts, pins, &placed);
  if (s.ok()) s = CheckLauncher(a.ho, placed.empty() ? "" : placed[0]);
  if (!s.ok()) return s;
  for (const std::string& h : launch::UsedHosts(placed)) {
    std::string only;
    size_t first = placed.size();
    for (size_t i = 0; i < placed.size(); i++)
      if (placed[i] == h) {
        only += (only.empty() ? "" : ",") + std::to_string(plan.upids[i]);
        first = std::min(first, plan.pos[i]);
      }
    HostPart part{h, {"restart"}, first};
    if (!plan.manifest.empty()) part.args.insert(part.args.end(), {"--only", only});
    if (a.lazy) part.args.push_back("--lazy");
    part.args.push_back(plan.manifest.empty() ? plan.images[0] : Parent(plan.manifest));
    Progress("revive: " + (h.empty() ? std::string("(launcher)") : h) + ": process(es) " + only);
    parts->push_back(std::move(part));
  }
  return Status::OK();
}

int Restart(const RestartArgs& a) {
  // Every revive-restart below (and every host's part: hosts.cpp forwards it) hands it to its processes.
  if (a.ib2tcp) setenv("REVIVE_IB2TCP", "1", 1);
  if (Status s = ApplyLevels(a.levels); !s.ok()) return Fail(s.message());
  Plan plan;
  Status s = MakePlan(a.what, &plan);
  if (!s.ok()) return Fail(s.message());
  // A damaged pre-image refuses the restart before anything is started (put back further down; with
  // --hosts by each host's part, each the pre-images made on its host).
  PreimageList pre;
  PreimageFilter pf;
  pf.here = !WantsHosts(a.ho) && a.map.empty();
  if (!a.pre_hosts.empty()) s = ParsePreHosts(a.pre_hosts, &pf);
  if (!s.ok()) return Fail(s.message());
  // Read only when a cut-back record's file is gone (FilesRestoredFrom parses every image's files section).
  std::set<std::string> image_files;
  bool images_read = false;
  auto restored_by_images = [&](const std::string& path) {
    if (!images_read) {
      for (std::string& f : FilesRestoredFrom(plan.images)) image_files.insert(std::move(f));
      images_read = true;
    }
    return image_files.count(path) > 0;
  };
  s = CheckPreimages(Parent(plan.manifest.empty() ? plan.images[0] : plan.manifest), pf, &pre, restored_by_images);
  if (!s.ok()) return Fail(s.message());
  std::string bin;
  s = FindHelper("REVIVE_RESTART_BIN", "restart", "revive-restart", &bin);
  if (!s.ok()) return Fail(s.message());
  Target t;
  s = ResolveTarget(a.port, plan.ckpt_dir, &t);
  if (!s.ok()) return Fail(s.message());
  // Taken from now on (a signal before the coordinator is up asks for a checkpoint once it is).
  int ckpt_sig = 0;
  s = ParseCheckpointSignal(a.ckpt_signal.empty() && getenv("REVIVE_CHECKPOINT_SIGNAL") != nullptr
                                ? getenv("REVIVE_CHECKPOINT_SIGNAL") : a.ckpt_signal, &ckpt_sig);
  if (!s.ok()) return Fail(s.message());
  ArmCheckpointSignal(ckpt_sig, t);
  std::string secret;
  s = coord::LoadOrCreateSecret(t.secret_file, &secret);
  if (!s.ok()) return Fail(s.message());
  // Without --port: the default port unless another computation holds it (then a free one, said).
  LaunchLock lock(t.port_explicit || !a.parent.empty() ? std::string() : plan.ckpt_dir);
  if (a.parent.empty()) s = AvoidForeignPort(&t, "revive restart");
  if (!s.ok()) return Fail(s.message());
  ArmCheckpointSignal(ckpt_sig, t);
  if (!a.only.empty()) {
    if (WantsHosts(a.ho) || !a.map.empty()) return Fail("--only is one host's part: it takes no placement options");
    s = KeepOnly(a.only, &plan);
    if (!s.ok()) return Fail(s.message());
  }
  // A host's part, or a restart on this machine (with --hosts, TLevelsRestart decides and moves first).
  if (!plan.manifest.empty() && !plan.man.levels.empty() && !WantsHosts(a.ho) && a.map.empty()) {
    s = ResolveImages(a.local_dir, &plan);
    if (!s.ok()) return Fail(s.message());
  }
  std::vector<HostPart> parts;  // --hosts etc.: this restart only places the host parts
  bool on_hosts = WantsHosts(a.ho) || !a.map.empty();
  bool kept_on_hosts = false;
  if (on_hosts && !plan.manifest.empty()) {  // images kept on the hosts: each process goes back to its host
    std::vector<std::string> hosts;
    std::string chosen;
    s = ResolveHosts(a.ho, &hosts);
    if (s.ok()) s = TLevelsRestart(a.ho, t, hosts, Parent(plan.manifest), a.lazy, &kept_on_hosts, &chosen, &parts);
    if (s.ok() && kept_on_hosts && !a.map.empty())
      s = Status::InvalidArgument("--map: images kept on the hosts (REVIVE_LEVELS) restart on the host they ran on");
    if (s.ok() && kept_on_hosts && chosen != Parent(plan.manifest)) s = MakePlan(chosen, &plan);
    if (!s.ok()) return Fail(s.message());
  }
  if (on_hosts && !kept_on_hosts) {
    s = PlanParts(a, plan, &parts);
    if (!s.ok()) return Fail(s.message());
  }
  if (on_hosts) {
    // Each part puts back the pre-images made on its host; the first part also those of hosts that
    // have no part now (a shared file comes back once; a node-local one on the first host).
    std::vector<std::string> hosts;
    for (const HostPart& part : parts) hosts.push_back(part.host);
    std::vector<std::string> specs = PreHostsSpecs(hosts);
    for (size_t k = 0; k < parts.size(); k++) parts[k].args.insert(parts[k].args.begin() + 1, {"--pre-hosts", specs[k]});
    if (a.fork)  // the subs follow the root's WELCOME; their parts' coordinators are started alike anyway
      for (HostPart& part : parts) part.args.insert(part.args.begin() + 1, "--fork");
  }
  // The coordinator's options are not recorded with a checkpoint (the restored processes follow its
  // WELCOME, whatever the launch had): --fork is given again here, as to `revive launch`.
  std::vector<std::string> extra;
  if (!plan.manifest.empty()) extra = {"--restart-manifest", plan.manifest};
  if (a.fork) extra.push_back("--fork");
  if (a.parent.empty()) WaitForFailedRestart(t);
  // With --parent (one host's part) this host's processes connect to a new sub-coordinator of that root.
  s = EnsurePartCoordinator(a.parent, &t, extra);
  if (!s.ok()) return Fail(a.parent.empty() ? s.message()
                                            : "sub-coordinator on port " + std::to_string(t.port) + " under " +
                                                  a.parent + ": " + s.message());
  lock.Release();
  if (a.only.empty()) {  // a part (--only) runs after the whole restart's check
    s = CheckNotRunning(t, plan);
    if (!s.ok()) return Fail(s.message());
  }
  if (on_hosts)
    return RunHostParts("revive restart", a.ho, t, parts,
                        [&t](const HostPart& part, int code) { return AbortUnfinishedRestart(t, part, code); });

  {
    // Files the stopped run changed after the checkpoint (not in any image) back as they were, before any
    // process is restored: the skeleton's opens and the files plugin's write-backs come after.
    size_t put = 0;
    s = RestorePreimages(*pre, &put);
    if (!s.ok()) return Fail(s.message());
    if (put) Progress("revive: " + std::to_string(put) + " file(s) changed after the checkpoint put back as they were");
  }
  Progress("revive: restoring " + std::to_string(plan.images.size()) + " process(es) from " +
           (plan.manifest.empty() ? plan.images[0] : plan.manifest));
  auto exec_image = [&](size_t k) {
    const std::string& image = plan.images[k];
    ExportTarget(t);
    signal(SIGPIPE, SIG_DFL);
    std::vector<const char*> argv = {bin.c_str()};
    if (a.lazy) argv.push_back("--lazy");
    argv.push_back(image.c_str());
    argv.push_back(nullptr);
    execv(bin.c_str(), const_cast<char* const*>(argv.data()));
    fprintf(stderr, "revive restart: exec %s: %s\n", bin.c_str(), strerror(errno));
    _exit(127);
  };
  constexpr int kPidTaken = -1;  // body(): a recorded pid was taken meanwhile; nothing was started
  bool in_ns = false;
  auto body = [&]() -> int {
    std::vector<pid_t> kids;
    std::vector<size_t> which;  // image index of each of kids
    std::vector<proctree::TreeMember> below;  // the tree's other processes: watched, not waited for
    // As the recorded process tree, pids included (docs/process-trees.md); we wait for its roots.
    Status st = proctree::StartRestorers(plan.images, exec_image, &kids, &which, &below);
    if (st.IsAlreadyExists() && !in_ns) return kPidTaken;
    if (!st.ok()) return Fail(st.message());
    // --lazy: the mapped chunks' checksums are checked beside the computation (lazy_verify.h); a damaged
    // one stops it: through the coordinator (every process), and its roots here in any case.
    std::unique_ptr<LazyVerifier> verifier;
    if (a.lazy) {
      verifier = std::make_unique<LazyVerifier>("revive restart", plan.images, [&t, kids](const std::string& why) {
        KillComputation(t, why);
        for (pid_t k : kids) kill(k, SIGKILL);
      });
    }
    // Exit status: the first root (manifest order) that did not exit 0, else 0. Signals as 128+sig. A
    // host's part also reports each root's status, so `revive restart --hosts` applies the same rule over
    // all hosts' roots.
    // A process below a root that dies before it is back: told like a root (below_watch.h).
    auto watch = std::make_unique<BelowWatch>(std::move(below), [&t, &plan](const proctree::TreeMember& m) {
      TellEnded(t, plan.upids[m.index], m.pid, -1);
    });
    std::vector<int> codes = WaitEachServing(kids, [&](size_t k, int code) {
      if (code != 0) TellEnded(t, plan.upids[which[k]], kids[k], code);
    });
    watch.reset();
    verifier.reset();
    std::vector<RootStatus> roots;
    for (size_t k = 0; k < kids.size(); k++) roots.push_back({plan.pos[which[k]], codes[k]});
    if (!a.status_file.empty()) {
      st = WriteStatusFile(a.status_file, roots);
      if (!st.ok()) fprintf(stderr, "revive restart: %s\n", st.message().c_str());
    }
    int code = FirstNonZero(std::move(roots));
    if (code != 0 && a.parent.empty()) SayRestartFailure(t);
    return code;
  };
  // The recorded pids cannot be made here (an ordinary user; a pid in use): in a new pid namespace they
  // can, through a user namespace where we are not root (docs/process-trees.md).
  // The same when a pid was free at the check but taken at the spawn (another restart of this checkpoint
  // beside this one).
  auto in_namespace = [&](const std::string& why) -> int {
    int code = 0;
    in_ns = true;
    s = proctree::RunInPidNamespace(body, &code, ServeCheckpointSignal);
    if (s.ok()) return code;
    in_ns = false;
    fprintf(stderr, "revive restart: warning: %s, and a new pid namespace cannot be made: %s\n", why.c_str(),
            s.message().c_str());
    return kPidTaken;
  };
  std::string why;
  if (proctree::WantsPidNamespace(plan.images, &why)) {
    int code = in_namespace(why);
    if (code != kPidTaken) return code;
    in_ns = true;  // no namespace to be had: report what goes wrong here
    return body();
  }
  int code = body();
  if (code != kPidTaken) return code;
  const char* env = getenv("REVIVE_PIDNS");
  if (!(env && strcmp(env, "0") == 0)) code = in_namespace("a recorded pid was taken");
  if (code != kPidTaken) return code;
  in_ns = true;
  return body();
}

}  // namespace

void AddRestartCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<RestartArgs>();
  CLI::App* c = app.add_subcommand("restart", "Restore a computation from its newest complete checkpoint");
  c->footer(
      "Restores a computation: from a checkpoint directory (its newest complete generation, the highest\n"
      "ckpt-G with a MANIFEST.json), one generation directory, or a single IMAGE.rimg. Starts a\n"
      "coordinator if none answers, runs revive-restart for every image and returns the exit status of\n"
      "the restored program (128+N if killed by signal N). --hosts places whole process trees on hosts,\n"
      "each host rebuilding its trees behind a sub-coordinator there (docs/hosts.md).");
  c->add_option("--port", a->port, "Coordinator port (default: REVIVE_PORT, else 7779, or a free port when 7779 serves another computation: docs/cli.md)");
  c->add_option("--checkpoint-signal", a->ckpt_signal,
                "SIG (e.g. USR1): that signal sent to revive asks for a checkpoint; default "
                "REVIVE_CHECKPOINT_SIGNAL, else none");
  c->add_flag("--lazy", a->lazy, "Map image pages on demand instead of reading them (compressed chunks are read)");
  c->add_flag("--fork", a->fork,
              "The restored computation writes its checkpoints from forked children, so it resumes sooner "
              "(as `revive launch --fork`)");
  c->add_flag("--ib2tcp", a->ib2tcp,
              "Verbs (InfiniBand) programs continue over TCP sockets instead of a verbs device "
              "(sets REVIVE_IB2TCP=1 for every process; docs/verbs.md)");
  c->add_option("--hosts", a->ho.hosts,
                "Comma-separated hosts; process tree k (a root and its descendants, in manifest order of "
                "their first process) goes to host k mod n; `slurm`: the nodes of SLURM_JOB_NODELIST, reached with "
                "srun (docs/slurm.md)");
  c->add_option("--map", a->map,
                "UPID=HOST,...: put the tree of that process on that host (the others follow --hosts); "
                "two processes of one tree on different hosts are refused");
  AddHostOptions(c, &a->ho);
  c->add_option("--local-dir", a->local_dir, "DIR: this host's node-local copy of the generation (a host's part)")
      ->group("");
  AddLevelsOption(c, &a->levels);
  c->add_option("--only", a->only, "UPID,...: restore only these processes of the manifest (one host's part)");
  c->add_option("--parent", a->parent,
                "HOST:PORT of the root coordinator: restore behind a new sub-coordinator on this host (with --port)");
  c->add_option("--status-file", a->status_file,
                "FILE: write each root's exit status by manifest index there (a host's part of --hosts)");
  c->add_option("--pre-hosts", a->pre_hosts,
                "=HOST or !HOST,...: put back only the pre-images made on HOST (on any host but these) (a host's part)")
      ->group("");
  // Without it, the directory launch and run default to (DMTCP's dmtcp_restart_script.sh needs no argument
  // either): a user who launched with the defaults restarts with `revive restart`.
  c->add_option("what", a->what,
                "IMAGE.rimg, ckpt-G directory or checkpoint directory (default: REVIVE_CKPT_DIR or ./revive-ckpt)")
      ->default_val(DefaultCkptDir());
  c->callback([a, rc] { *rc = Restart(*a); });
}

}  // namespace revive::cli
