// `revive launch [options] -- PROG ARGS`: run a program with the injected library and a coordinator.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/hosts.h"
#include "cli/ckpt_signal.h"
#include "cli/paths.h"
#include "coord/secret.h"
#include "coord/tlevels.h"
#include "core/env.h"
#include "launch/hostlist.h"

namespace revive::cli {
namespace {

struct LaunchArgs {
  std::string port, ckpt_dir;
  double interval = 0;
  bool compress = false, no_compress = false, fork = false;
  std::vector<std::string> argv;
  HostOpts ho;         // --hosts/--hostfile/--launcher/--sub-port: copies spread over hosts (docs/hosts.md)
  long n = 0;          // -n: number of copies (default: one per host, or 1)
  std::string indexes; // --indexes I,J: this host's copies (one host's part of --hosts)
  std::string parent;  // --parent HOST:PORT: run behind a new sub-coordinator of that root
  std::string chdir;   // --chdir DIR: the part's working directory (ssh starts in $HOME)
  std::string status_file;  // --status-file F: report each copy's status by index (a host's part)
  std::string ckpt_signal;  // --checkpoint-signal SIG (or REVIVE_CHECKPOINT_SIGNAL): ckpt_signal.h
  std::string levels;       // --levels SPEC: REVIVE_LEVELS (images kept on the hosts)
};

int Fail(const std::string& msg, int code = 2) {
  fprintf(stderr, "revive launch: %s\n", msg.c_str());
  return code;
}

// "0,2" -> {0, 2}; each below `size`.
// REVIVE_OUTSIDE_FILES: the regular files open for writing that the program inherits from our caller
// (fd 3 and up, not close-on-exec). Others outside the computation write them too (ctest's log, a
// pipeline script's `exec 3>>run.log`), so a restart must not put their contents back nor cut them
// (plugins/common/outside_files.h). At most 16, as the plugins read.
std::string OutsideFiles() {
  std::string list;
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return list;
  int self = dirfd(d);
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    long fd = strtol(e->d_name, &end, 10);
    if (*end || fd < 3 || fd == self) continue;
    int fdf = fcntl(int(fd), F_GETFD), fl = fcntl(int(fd), F_GETFL);
    struct stat st;
    if (fdf < 0 || (fdf & FD_CLOEXEC) || fl < 0 || (fl & O_ACCMODE) == O_RDONLY || (fl & O_PATH) ||
        fstat(int(fd), &st) != 0 || !S_ISREG(st.st_mode) || n == 16)
      continue;
    std::string item = std::to_string(uint64_t(st.st_dev)) + ":" + std::to_string(uint64_t(st.st_ino));
    if (("," + list + ",").find("," + item + ",") != std::string::npos) continue;
    list += (list.empty() ? "" : ",") + item;
    ++n;
  }
  closedir(d);
  return list;
}

Status ParseIndexes(const std::string& list, long size, std::vector<long>* out) {
  for (const std::string& w : launch::SplitCommas(list)) {
    char* end = nullptr;
    long i = strtol(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || i < 0 || i >= size)
      return Status::InvalidArgument("--indexes " + list + ": \"" + w + "\" is not a copy index 0.." +
                                     std::to_string(size - 1));
    out->push_back(i);
  }
  return Status::OK();
}

// --hosts: copy i goes to host i mod n; each host's part is `revive launch --indexes <its copies>` run
// there through the launcher (behind its own sub-coordinator when there is more than one host).
// Decided before the root coordinator starts, so bad input leaves nothing behind.
Status PlanParts(const LaunchArgs& a, const Target& t, std::vector<HostPart>* parts) {
  std::vector<std::string> hosts;
  Status s = ResolveHosts(a.ho, &hosts);
  if (s.ok()) s = CheckLauncher(a.ho, hosts[0]);
  if (!s.ok()) return s;
  long n = a.n != 0 ? a.n : long(hosts.size());
  std::vector<std::string> placed = launch::Place(hosts, size_t(n));
  for (size_t k = 0; k < placed.size(); k++) {
    bool first = true;
    for (size_t j = 0; j < k; j++) first = first && placed[j] != placed[k];
    if (!first) continue;
    std::string idx;
    for (size_t i = k; i < placed.size(); i++)
      if (placed[i] == placed[k]) idx += (idx.empty() ? "" : ",") + std::to_string(i);
    HostPart part{placed[k],
                  {"launch", "--ckpt-dir", t.ckpt_dir, "--chdir", Absolute("."), "-n", std::to_string(n), "--indexes", idx},
                  k};
    if (a.compress) part.args.push_back("--compress");
    if (a.fork) part.args.push_back("--fork");
    part.args.push_back("--");
    part.args.insert(part.args.end(), a.argv.begin(), a.argv.end());
    parts->push_back(std::move(part));
  }
  return Status::OK();
}

int Launch(const LaunchArgs& a) {
  if (a.argv.empty()) return Fail("no program given (usage: revive launch [options] -- PROG ARGS...)");
  if (Status s = ApplyLevels(a.levels); !s.ok()) return Fail(s.message());
  if (a.parent.empty() && a.indexes.empty() && !WantsHosts(a.ho)) {  // the whole computation on this host
    coord::TLevelsConfig tl;
    if (coord::LoadTLevelsConfig(&tl).ok() && (tl.AnyLevels() & (coord::kTL2 | coord::kTL3)))
      return Fail("REVIVE_LEVELS=" + tl.spec + ": partner copies (L2) and parity (L3) need other hosts, and this "
                  "computation runs on this host only (no --hosts); use L1 and L4 here (e.g. \"L1,L4@4\")");
  }
  if (a.compress && a.no_compress) return Fail("--compress and --no-compress contradict each other");
  if (a.n < 0) return Fail("-n " + std::to_string(a.n) + ": the number of copies must be at least 1");
  if (!a.indexes.empty() && WantsHosts(a.ho)) return Fail("--indexes is one host's part: it takes no --hosts");
  if (!a.chdir.empty() && chdir(a.chdir.c_str()) != 0)
    return Fail("--chdir " + a.chdir + ": " + strerror(errno));
  Target t;
  Status s = ResolveTarget(a.port, a.ckpt_dir, &t);
  // --checkpoint-signal: taken from now on (one sent before the program runs is served once it does).
  int ckpt_sig = 0;
  if (s.ok()) {
    std::string sig_name = a.ckpt_signal.empty() && getenv("REVIVE_CHECKPOINT_SIGNAL") != nullptr
                               ? getenv("REVIVE_CHECKPOINT_SIGNAL") : a.ckpt_signal;
    s = ParseCheckpointSignal(sig_name, &ckpt_sig);
  }
  if (s.ok()) ArmCheckpointSignal(ckpt_sig, t);
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
  // Which coordinator: without --port, the one already serving this directory (a launch that joins a
  // computation moved off the default port), else the default port unless another computation holds it.
  // Launches of one directory take turns until their coordinator is up, so two that start together
  // while the default port is someone else's do not each pick a port of their own.
  LaunchLock lock(t.port_explicit || !a.parent.empty() ? std::string() : t.ckpt_dir);
  PreferRecordedPort(&t);
  if (a.parent.empty()) s = AvoidForeignPort(&t, "revive launch");
  if (!s.ok()) return Fail(s.message());
  ArmCheckpointSignal(ckpt_sig, t);

  std::vector<std::string> extra;
  if (a.interval > 0) extra = {"--interval", std::to_string(a.interval)};
  if (a.compress) extra.push_back("--compress");
  if (a.fork) extra.push_back("--fork");
  if (WantsHosts(a.ho)) {  // the root coordinator runs here; the copies run on their hosts
    std::vector<HostPart> parts;
    s = PlanParts(a, t, &parts);
    if (s.ok()) s = EnsureCoordinator(t, extra);
    if (!s.ok()) return Fail(s.message());
    lock.Release();
    return RunHostParts("revive launch", a.ho, t, parts);
  }
  std::vector<long> copies;  // indexes of the copies started here; empty: exec PROG in place
  if (!a.indexes.empty()) s = ParseIndexes(a.indexes, a.n > 0 ? a.n : 1, &copies);
  else if (a.n > 1) for (long i = 0; i < a.n; i++) copies.push_back(i);
  if (!s.ok()) return Fail(s.message());
  // With --parent (one host's part) this host's copies connect to a new sub-coordinator of that root.
  s = EnsurePartCoordinator(a.parent, &t, extra);
  if (!s.ok()) return Fail(a.parent.empty() ? s.message()
                                            : "sub-coordinator on port " + std::to_string(t.port) + " under " +
                                                  a.parent + ": " + s.message());
  lock.Release();

  std::string preload = lib;
  const char* old = getenv("LD_PRELOAD");
  if (old != nullptr && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  ExportTarget(t);
  setenv("REVIVE_COMPRESS", a.compress ? "1" : "0", 1);
  if (a.no_compress) setenv("REVIVE_COMPRESS_SMALL", "0", 1);  // not even the small regions
  setenv("REVIVE_FORK", a.fork ? "1" : "0", 1);
  if (getenv("REVIVE_LOG") == nullptr) setenv("REVIVE_LOG", "1", 1);
  // REVIVE_SIGNAL passes through unchanged when the user set it.
  // The files plugin's launch root (the process started here, through its execs) walks the node-local
  // directories for files created since this moment (docs/plugins.md, "files").
  struct timespec t0;
  clock_gettime(CLOCK_REALTIME, &t0);
  setenv("REVIVE_LAUNCH_T0", std::to_string(int64_t(t0.tv_sec) * 1000000000 + t0.tv_nsec).c_str(), 1);
  setenv("REVIVE_LAUNCH_ROOT", std::to_string(getpid()).c_str(), 1);
  // Its working directory: the root lists it at each checkpoint; other processes list theirs when it is
  // another (files created there after the checkpoint are moved aside at restart).
  if (char cwd[PATH_MAX]; getcwd(cwd, sizeof cwd)) setenv("REVIVE_LAUNCH_CWD", cwd, 1);

  if (std::string outside = OutsideFiles(); !outside.empty()) setenv("REVIVE_OUTSIDE_FILES", outside.c_str(), 1);
  else unsetenv("REVIVE_OUTSIDE_FILES");

  std::vector<char*> argv;
  for (const auto& s2 : a.argv) argv.push_back(const_cast<char*>(s2.c_str()));
  argv.push_back(nullptr);
  signal(SIGPIPE, SIG_DFL);  // the program gets the dispositions it would have had without revive
  if (copies.empty() && ckpt_sig == 0) {
    execv(prog.c_str(), argv.data());
    return Fail("exec " + prog + ": " + strerror(errno), 126);
  }
  if (copies.empty()) {
    // revive stays, to take the checkpoint signal; the program is its only child and gets every other
    // signal sent to revive.
    pid_t pid = fork();
    if (pid < 0) return Fail(std::string("fork: ") + strerror(errno), 1);
    if (pid == 0) {
      setenv("REVIVE_LAUNCH_ROOT", std::to_string(getpid()).c_str(), 1);
      execv(prog.c_str(), argv.data());
      fprintf(stderr, "revive launch: exec %s: %s\n", prog.c_str(), strerror(errno));
      _exit(126);
    }
    ForwardSignalsTo(pid);
    return WaitEachServing({pid})[0];
  }
  // Several copies: each learns which one it is (REVIVE_LAUNCH_INDEX of REVIVE_LAUNCH_SIZE), as an MPI
  // rank would; we wait for all and return the first non-zero status in index order. A host's part
  // reports every copy's status by index, so `--hosts` applies that rule over all hosts' copies.
  setenv("REVIVE_LAUNCH_SIZE", std::to_string(a.n).c_str(), 1);
  std::vector<pid_t> kids;
  for (long i : copies) {
    pid_t pid = fork();
    if (pid < 0) return Fail(std::string("fork: ") + strerror(errno), 1);
    if (pid == 0) {
      setenv("REVIVE_LAUNCH_INDEX", std::to_string(i).c_str(), 1);
      setenv("REVIVE_LAUNCH_ROOT", std::to_string(getpid()).c_str(), 1);
      execv(prog.c_str(), argv.data());
      fprintf(stderr, "revive launch: exec %s: %s\n", prog.c_str(), strerror(errno));
      _exit(126);
    }
    kids.push_back(pid);
  }
  std::vector<int> codes = WaitEachServing(kids);
  std::vector<RootStatus> each;
  for (size_t k = 0; k < kids.size(); k++) each.push_back({size_t(copies[k]), codes[k]});
  if (!a.status_file.empty()) {
    s = WriteStatusFile(a.status_file, each);
    if (!s.ok()) fprintf(stderr, "revive launch: %s\n", s.message().c_str());
  }
  return FirstNonZero(std::move(each));
}

}  // namespace

void AddLaunchCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<LaunchArgs>();
  CLI::App* c = app.add_subcommand("launch", "Run a program under checkpoint control");
  c->footer(
      "Runs PROG under checkpoint control: starts a coordinator if none answers on the port, creates the\n"
      "checkpoint directory, preloads librevive_inject.so and execs PROG (its exit status is ours).\n"
      "Statically linked programs are refused. -n N starts N copies; --hosts spreads them over hosts, each\n"
      "host's copies behind a sub-coordinator there (docs/hosts.md).\n"
      "Example: revive launch --ckpt-dir /scratch/ck -- ./sim input.dat\n"
      "         REVIVE_COORD_HOST=10.0.0.1 revive launch --hosts n1,n2 -n 8 -- ./solver");
  c->add_option("--port", a->port, "Coordinator port (default: REVIVE_PORT, else the port recorded by the directory's running coordinator, else 7779, or a free port when 7779 serves another computation: docs/cli.md)");
  c->add_option("--ckpt-dir", a->ckpt_dir, "Checkpoint directory (default: REVIVE_CKPT_DIR or ./revive-ckpt)");
  c->add_option("--interval", a->interval, "Checkpoint automatically every SECONDS (new coordinator only)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--compress", a->compress,
              "Compress all of every image with zstd, multi-threaded (default: only regions up to 8 MiB, the "
              "program's metadata; its large data is written as it is, for speed)");
  c->add_flag("--no-compress", a->no_compress, "Write images with no compression at all");
  c->add_flag("--fork", a->fork, "Write images from a forked child so the program resumes sooner");
  c->add_option("--hosts", a->ho.hosts, "Comma-separated hosts: copy i of -n runs on host i mod n (docs/hosts.md); `slurm`: the nodes of "
                "SLURM_JOB_NODELIST, reached with srun (docs/slurm.md)");
  AddHostOptions(c, &a->ho);
  AddLevelsOption(c, &a->levels);
  c->add_option("-n", a->n, "Number of copies of PROG (default: one per host, or 1); each gets "
                            "REVIVE_LAUNCH_INDEX and REVIVE_LAUNCH_SIZE");
  c->add_option("--indexes", a->indexes, "I,J,...: start only these copies (one host's part of --hosts)");
  c->add_option("--parent", a->parent,
                "HOST:PORT of the root coordinator: run behind a new sub-coordinator on this host (with --port)");
  c->add_option("--chdir", a->chdir, "Working directory of the program (a host's part: ssh starts in $HOME)");
  c->add_option("--status-file", a->status_file,
                "FILE: write each copy's exit status by index there (a host's part of --hosts)");
  c->add_option("--checkpoint-signal", a->ckpt_signal,
                "SIG (e.g. USR1): that signal sent to revive asks for a checkpoint (a batch system's "
                "warning, scancel --signal); default REVIVE_CHECKPOINT_SIGNAL, else none");
  c->add_option("prog", a->argv, "-- PROG ARGS...: the program and its arguments")->required();
  c->positionals_at_end();
  c->callback([a, rc] { *rc = Launch(*a); });
}

}  // namespace revive::cli
