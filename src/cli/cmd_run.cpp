// `revive run [options] -- COMMAND`: a supervisor that keeps a job going until it finishes. It launches the
// job (transparent: `revive launch`; --app: the command as is, for programs using the application-level
// library), watches it (its exit, a checkpoint that a process does not answer, the progress heartbeats of
// the application-level library, lost hosts), tears the rest down, and relaunches from the newest
// checkpoint that can be restored, up to --restarts times. Docs: docs/run.md.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "cli/ckpt_signal.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "coord/secret.h"
#include "cli/hosts.h"
#include "cli/paths.h"
#include "cli/run_policy.h"
#include "cli/slurm.h"
#include "coord/dead_ranks.h"
#include "coord/manifest.h"
#include "core/env.h"
#include "launch/launcher.h"

namespace revive::cli {
namespace {

// Exit statuses (docs/run.md): 0 the job finished; 70 gave up (restart limit, no usable checkpoint, no
// host left); 75 stopped on the checkpoint signal after a checkpoint (requeued with --requeue);
// 128+N ended by signal N sent to the supervisor; 2 bad usage.
constexpr int kGaveUp = 70, kStopped = 75;

struct RunArgs {
  long restarts = 3;
  std::string interval = "0";
  double mtbf = 0, hang_timeout = 0;
  bool app = false, fresh = false, requeue = false, compress = false, fork = false;
  std::string port, ckpt_dir, ckpt_signal;
  HostOpts ho;
  long n = 0, spares = 0;
  std::vector<std::string> argv;
};

volatile sig_atomic_t g_stop = 0;     // SIGTERM/INT/HUP: tear down and leave
volatile sig_atomic_t g_ckpt_sig = 0;  // the checkpoint signal: checkpoint, (requeue,) tear down, leave

void OnStop(int sig) { g_stop = sig; }
void OnCkptSignal(int) { g_ckpt_sig = 1; }

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string Str(const coord::Payload& p, const char* key) {
  const char* v;
  size_t n;
  return p.get(key, &v, &n) ? std::string(v, n) : std::string();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& w : v) s += (s.empty() ? "" : ",") + w;
  return s;
}

std::string Describe(int code) {
  if (code > 128 && code < 128 + 65) return std::string("killed by signal ") + strsignal(code - 128);
  return "exit status " + std::to_string(code);
}

class Supervisor {
 public:
  // The backstop of PassOverSuspects: one failed relaunch from a generation, with no newer generation
  // written meanwhile, passes it over (it may hold the failure itself, or be damaged). Going one
  // generation back costs recomputation, never correctness.
  explicit Supervisor(const RunArgs& a) : a_(a), choice_(kTriesPerGeneration) {}
  static constexpr unsigned kTriesPerGeneration = 1;
  int Run();

 private:
  enum class Event { kDone, kFailed, kHung, kStop, kCkptSignal };

  void Log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  Status Prepare();
  Status StartAttempt(uint64_t from);
  Event Watch(std::string* what);
  bool HeartbeatsStale(std::string* what);
  // A checkpoint asked of the coordinator: true if it completed; *silent when a process did not answer.
  bool TakeCheckpoint(double* seconds, bool* silent, std::string* error);
  void Teardown();
  void KillDescendants();
  void ProbeHosts();
  uint64_t NewestGeneration();
  void PassOverSuspects();
  void MarkDone();
  bool DeadRankSeen(std::string* what, double min_age = 0);
  static constexpr double kDeadRankGrace = 5;  // s: an MPI launcher ends its job within about a second

  RunArgs a_;
  Target t_;
  IntervalPolicy interval_;
  RestartChoice choice_;
  std::vector<std::string> hosts_, spares_;  // hosts in use; held back for lost ones
  std::string self_, heartbeat_dir_, done_marker_;
  uint64_t floor_ = 0;         // generations <= floor_ belong to an earlier, finished run
  pid_t child_ = -1;           // the attempt: `revive launch`/`revive restart`, or the --app command
  double t0_ = 0, last_ckpt_ = 0, cost_ = 0;
  uint64_t gen_at_start_ = 0;  // newest generation when the attempt began
  unsigned failures_ = 0;
  unsigned attempts_ = 0;
  int child_code_ = 0;
  int log_fd_ = -1;
};

void Supervisor::Log(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char line[2200];
  int n = snprintf(line, sizeof line, "revive run: [%.1f s] %s\n", Now() - t0_, buf);
  if (n > int(sizeof line) - 1) n = int(sizeof line) - 1;
  (void)!write(2, line, size_t(n));
  // Also in <ckpt-dir>/run.log (appended): the job's stderr is often ours, and a restart gives a file the
  // job writes the contents it had at the checkpoint, which would take our later lines with it.
  if (log_fd_ >= 0) (void)!write(log_fd_, line, size_t(n));
}

Status Supervisor::Prepare() {
  if (a_.argv.empty()) return Status::InvalidArgument("no command given (usage: revive run [options] -- COMMAND ...)");
  if (a_.restarts < 0) return Status::InvalidArgument("--restarts " + std::to_string(a_.restarts) + ": must be >= 0");
  if (!(a_.hang_timeout >= 0)) return Status::InvalidArgument("--hang-timeout: must be >= 0 seconds");
  if (a_.app && (a_.compress || a_.fork || a_.n != 0))
    return Status::InvalidArgument("--compress, --fork and -n are for transparent jobs; with --app the command "
                                   "starts its own processes (e.g. mpiexec -n N)");
  Status s = ParseInterval(a_.interval, a_.mtbf, &interval_);
  if (!s.ok()) return s;
  s = ResolveTarget(a_.port, a_.ckpt_dir, &t_);
  if (s.ok()) s = CreateDirs(Env::Default(), t_.ckpt_dir);
  std::string secret;
  if (s.ok()) s = coord::LoadOrCreateSecret(t_.secret_file, &secret);
  // Without --port: the default port unless another computation holds it; every launch and restart of
  // this run then gets the chosen port explicitly.
  if (s.ok()) s = AvoidForeignPort(&t_, "revive run");
  if (!s.ok()) return s;
  log_fd_ = open((t_.ckpt_dir + "/run.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  s = SelfPath(&self_);
  if (!s.ok()) return s;
  if (a_.spares < 0) return Status::InvalidArgument("--spares must be >= 0");
  if (WantsHosts(a_.ho)) {
    std::vector<std::string> all;
    s = ResolveHosts(a_.ho, &all);
    if (!s.ok()) return s;
    if (size_t(a_.spares) >= all.size())
      return Status::InvalidArgument("--spares " + std::to_string(a_.spares) + " leaves none of the " +
                                     std::to_string(all.size()) + " hosts (" + Join(all) + ") to run on");
    hosts_.assign(all.begin(), all.end() - a_.spares);
    spares_.assign(all.end() - a_.spares, all.end());
  } else if (a_.spares > 0) {
    return Status::InvalidArgument("--spares needs --hosts or --hostfile");
  }
  // A finished run leaves a marker naming its newest generation: those are not restarted from again.
  done_marker_ = t_.ckpt_dir + "/.revive-run-done";
  std::string text;
  if (ReadFileToString(Env::Default(), done_marker_, &text).ok()) {
    floor_ = strtoull(text.c_str(), nullptr, 10);
    unlink(done_marker_.c_str());
    Log("%s: the run that wrote generations up to %llu finished; starting afresh", t_.ckpt_dir.c_str(),
        (unsigned long long)floor_);
  }
  if (a_.fresh) floor_ = std::max(floor_, NewestGeneration());
  heartbeat_dir_ = t_.ckpt_dir + "/.revive-heartbeat";
  return Status::OK();
}

uint64_t Supervisor::NewestGeneration() {
  std::vector<uint64_t> gens;
  if (!coord::ListCompleteGenerations(Env::Default(), t_.ckpt_dir, &gens).ok() || gens.empty()) return 0;
  return gens[0];
}

Status Supervisor::StartAttempt(uint64_t from) {
  unlink((t_.ckpt_dir + "/" + coord::kDeadRanksFile).c_str());  // a death of an earlier attempt is not this one's
  std::vector<std::string> argv;
  if (a_.app) {
    // The application-level library finds its own newest checkpoint; it shows progress in heartbeat_dir_.
    (void)CreateDirs(Env::Default(), heartbeat_dir_);
    std::vector<std::string> names;
    if (Env::Default()->GetChildren(heartbeat_dir_, &names).ok())
      for (const auto& n : names) unlink((heartbeat_dir_ + "/" + n).c_str());
    for (std::string w : a_.argv) {
      for (size_t p; (p = w.find("{hosts}")) != std::string::npos;) w.replace(p, 7, Join(hosts_));
      argv.push_back(w);
    }
  } else if (from == 0) {
    argv = {self_, "launch", "--port", std::to_string(t_.port), "--ckpt-dir", t_.ckpt_dir};
    if (!hosts_.empty()) argv.insert(argv.end(), {"--hosts", Join(hosts_)});
    // Named, not defaulted again: the hosts of `--hosts slurm` arrive expanded, and want srun.
    if (!hosts_.empty() || !a_.ho.launcher.empty()) argv.insert(argv.end(), {"--launcher", LauncherOf(a_.ho)});
    if (!a_.ho.sub_port.empty()) argv.insert(argv.end(), {"--sub-port", a_.ho.sub_port});
    if (a_.n > 0) argv.insert(argv.end(), {"-n", std::to_string(a_.n)});
    if (a_.compress) argv.push_back("--compress");
    if (a_.fork) argv.push_back("--fork");
    argv.push_back("--");
    argv.insert(argv.end(), a_.argv.begin(), a_.argv.end());
  } else {
    argv = {self_, "restart", "--port", std::to_string(t_.port)};
    if (!hosts_.empty()) argv.insert(argv.end(), {"--hosts", Join(hosts_)});
    // Named, not defaulted again: the hosts of `--hosts slurm` arrive expanded, and want srun.
    if (!hosts_.empty() || !a_.ho.launcher.empty()) argv.insert(argv.end(), {"--launcher", LauncherOf(a_.ho)});
    if (!a_.ho.sub_port.empty()) argv.insert(argv.end(), {"--sub-port", a_.ho.sub_port});
    argv.push_back(coord::GenerationDir(t_.ckpt_dir, from));
  }
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    setpgid(0, 0);  // the attempt is one process group: torn down as one
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) signal(s, SIG_DFL);
    setenv("REVIVE_FAIL_FAST", "1", 1);
    setenv("REVIVE_CKPT_DIR", t_.ckpt_dir.c_str(), 1);
    if (a_.app) {
      setenv("REVIVE_HEARTBEAT_DIR", heartbeat_dir_.c_str(), 1);
      setenv("REVIVE_RUN_HOSTS", Join(hosts_).c_str(), 1);
      if (interval_.automatic || interval_.fixed > 0) {
        setenv("REVIVE_CP_INTERVAL", interval_.automatic ? "auto" : std::to_string(interval_.fixed).c_str(), 1);
        setenv("REVIVE_MTBF", std::to_string(EstimatedMtbf(interval_.mtbf_prior, Now() - t0_, failures_)).c_str(), 1);
      }
    } else if (a_.hang_timeout > 0) {
      setenv("REVIVE_PHASE_TIMEOUT", std::to_string(a_.hang_timeout).c_str(), 1);
    }
    ExecArgv(argv, "revive run: exec");
  }
  setpgid(pid, pid);
  child_ = pid;
  attempts_++;
  last_ckpt_ = Now();
  gen_at_start_ = NewestGeneration();
  std::string cmd;
  for (const auto& w : argv) cmd += (cmd.empty() ? "" : " ") + w;
  if (a_.app)
    Log("attempt %u: started %s", attempts_, cmd.c_str());
  else if (from == 0)
    Log("attempt %u: launched the job%s%s", attempts_, hosts_.empty() ? "" : " on ", Join(hosts_).c_str());
  else
    Log("attempt %u: restarting from generation %llu%s%s", attempts_, (unsigned long long)from,
        hosts_.empty() ? "" : " on ", Join(hosts_).c_str());
  return Status::OK();
}

bool Supervisor::TakeCheckpoint(double* seconds, bool* silent, std::string* error) {
  *silent = false;
  ScopedClient sc;
  Status s = ConnectCli(t_, 2000, &sc.c);
  if (!s.ok()) {
    *error = s.message();
    return false;
  }
  double t = Now();
  coord::FrameBuilder b(sc.c.tx_buffer(), coord::Client::kTxCap, coord::kCkptRequest, sc.c.next_seq());
  coord::FrameHeader h;
  coord::Payload p;
  if (!sc.c.send(b) || sc.c.recv(&h, &p, -1) != 1) {
    *error = sc.c.error();
    return false;
  }
  *seconds = Now() - t;
  if (h.type == coord::kError) {
    *error = "coordinator: " + Str(p, "reason");
    return false;
  }
  if (Str(p, "ok") == "1") return true;
  const std::string gen = Str(p, "generation");  // 0: refused before one began
  *error = (gen.empty() || gen == "0" ? "" : "generation " + gen + " failed: ") + Str(p, "error");
  *silent = Str(p, "silent") == "1";  // a process (here or behind a sub-coordinator) timed out: hung
  return false;
}

// A transparent job whose launcher exited 0 while its coordinator saw an MPI rank end without exit() did
// not finish: Open MPI's mpirun under `--mca orte_abort_on_non_zero_status 0` exits 0 whatever its ranks
// did (librevive_rma's survivors end with status 79, docs/rma.md). The coordinator writes the file.
// min_age > 0: only a death recorded at least that many seconds ago (the job is still running then).
bool Supervisor::DeadRankSeen(std::string* what, double min_age) {
  const std::string path = t_.ckpt_dir + "/" + coord::kDeadRanksFile;
  std::string text;
  struct stat sb;
  if (!ReadFileToString(Env::Default(), path, &text).ok() || text.empty() || stat(path.c_str(), &sb) != 0)
    return false;
  const double age = double(time(nullptr) - sb.st_mtime);
  if (min_age > 0 && age < min_age) return false;
  const std::string who = text.substr(0, text.find('\n'));
  *what = min_age > 0 ? who + " ended without exit() " + std::to_string(int(age)) + " s ago and the job still runs"
                      : "the job's launcher exited 0, but " + who + " ended without exit() (killed or crashed)";
  return true;
}

bool Supervisor::HeartbeatsStale(std::string* what) {
  if (a_.hang_timeout <= 0) return false;
  std::vector<std::string> names;
  if (!Env::Default()->GetChildren(heartbeat_dir_, &names).ok()) return false;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  for (const auto& n : names) {
    struct stat st;
    if (n.rfind("rank.", 0) != 0 || stat((heartbeat_dir_ + "/" + n).c_str(), &st) != 0) continue;
    double age = double(now.tv_sec - st.st_mtim.tv_sec) + double(now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
    if (age > a_.hang_timeout) {
      *what = n + " is hung: its heartbeat did not advance for " + std::to_string(int(age)) + " s (--hang-timeout " +
              std::to_string(int(a_.hang_timeout)) + ")";
      return true;
    }
  }
  return false;
}

Supervisor::Event Supervisor::Watch(std::string* what) {
  for (;;) {
    if (g_stop) return Event::kStop;
    if (g_ckpt_sig) return Event::kCkptSignal;
    int st = 0;
    pid_t r;
    // Also reaps what was reparented to us (a subreaper) and ended: daemonized helpers of the job must not
    // pile up as zombies over a long run.
    while ((r = waitpid(-1, &st, WNOHANG)) > 0 && r != child_) {
    }
    if (r == child_) {
      child_ = -1;
      child_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
      *what = "the job ended (" + Describe(child_code_) + ")";
      if (child_code_ == 0 && !a_.app && DeadRankSeen(what)) return Event::kFailed;
      return child_code_ == 0 ? Event::kDone : Event::kFailed;
    }
    if (a_.app) {
      if (HeartbeatsStale(what)) return Event::kHung;
    } else {
      double every = NextInterval(interval_, cost_, Now() - t0_, failures_);
      if (every > 0 && Now() - last_ckpt_ >= every) {
        double secs = 0;
        bool silent = false;
        std::string err;
        bool ok = TakeCheckpoint(&secs, &silent, &err);
        last_ckpt_ = Now();
        if (ok) {
          cost_ = secs;
          Log("checkpoint: generation %llu in %.3f s; next in %.1f s", (unsigned long long)NewestGeneration(),
              secs, NextInterval(interval_, cost_, Now() - t0_, failures_));
        } else if (silent) {
          *what = "a process is hung: " + err;
          return Event::kHung;
        } else if (waitpid(child_, &st, WNOHANG) == 0) {
          // A rank died long ago and the job still runs: its launcher lets the survivors live and they
          // wait for the dead one (Open MPI under --enable-recovery; a death before librevive_rma's
          // watcher was up). Nothing will end it but us.
          if (DeadRankSeen(what, kDeadRankGrace)) return Event::kHung;
          Log("checkpoint failed (the job goes on): %s", err.c_str());
        } else {
          // The job ended while we checkpointed: the next look at it says how.
          child_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
          child_ = -1;
          *what = "the job ended (" + Describe(child_code_) + ") during a checkpoint";
          if (child_code_ == 0 && DeadRankSeen(what)) return Event::kFailed;
          return child_code_ == 0 ? Event::kDone : Event::kFailed;
        }
      }
    }
    usleep(50000);  // cut short by our signals (no SA_RESTART)
  }
}

// Every process left under us: the attempt's group first; then whatever was reparented to us (we are a
// child subreaper: daemonized coordinators, ranks an MPI launcher put in process groups of their own,
// processes on simulated hosts), until none is left.
void Supervisor::KillDescendants() {
  double until = Now() + 10;
  for (;;) {
    std::vector<pid_t> kids;
    DIR* d = opendir("/proc");
    if (d == nullptr) return;
    while (struct dirent* e = readdir(d)) {
      pid_t pid = pid_t(atoi(e->d_name));
      if (pid <= 0) continue;
      std::string stat;
      if (!ReadFileToString(Env::Default(), "/proc/" + std::to_string(pid) + "/stat", &stat).ok()) continue;
      size_t rp = stat.rfind(')');
      if (rp == std::string::npos) continue;
      int ppid = 0;
      char state = 0;
      if (sscanf(stat.c_str() + rp + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid()) kids.push_back(pid);
    }
    closedir(d);
    if (kids.empty() || Now() > until) return;
    for (pid_t k : kids) kill(k, SIGKILL);
    for (pid_t k : kids) waitpid(k, nullptr, 0);
  }
}

void Supervisor::Teardown() {
  if (!a_.app) {
    // Every process of the computation, on every host, through the coordinators.
    ScopedClient sc;
    if (ConnectCli(t_, 1000, &sc.c).ok()) {
      coord::FrameBuilder b(sc.c.tx_buffer(), coord::Client::kTxCap, coord::kKill, sc.c.next_seq());
      coord::FrameHeader h;
      coord::Payload p;
      if (sc.c.send(b)) (void)sc.c.recv(&h, &p, 3000);
    }
  }
  if (child_ > 0) {
    // An MPI launcher given SIGTERM ends its ranks itself; a few seconds for that, then SIGKILL.
    kill(-child_, SIGTERM);
    double until = Now() + (a_.app ? 3 : 1);
    while (Now() < until && waitpid(child_, nullptr, WNOHANG) == 0) usleep(20000);
    kill(-child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    child_ = -1;
  }
  KillDescendants();
  // The coordinator is gone with the processes (--exit-on-last) or was ours to kill; wait for its port so
  // that the relaunch starts a new one.
  double until = Now() + 10;
  while (Listening(t_) && Now() < until) usleep(50000);
}

// After a failure: a host the launcher cannot reach any more is replaced by a spare, or dropped.
void Supervisor::ProbeHosts() {
  if (hosts_.empty()) return;
  std::string tmpl = launch::ResolveTemplate(LauncherOf(a_.ho));
  std::vector<std::string> alive;
  for (const auto& h : hosts_) {
    std::vector<std::string> argv;
    bool ok = launch::Expand(tmpl, h, {"true"}, &argv).ok();
    if (ok) {
      pid_t pid = fork();
      if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
          dup2(fd, 0);
          dup2(fd, 1);
          dup2(fd, 2);
        }
        std::vector<char*> v;
        for (auto& w : argv) v.push_back(w.data());
        v.push_back(nullptr);
        execvp(v[0], v.data());
        _exit(127);
      }
      int st = 1;
      double until = Now() + 10;
      while (pid > 0 && waitpid(pid, &st, WNOHANG) == 0) {
        if (Now() > until) {
          kill(pid, SIGKILL);
          waitpid(pid, &st, 0);
          break;
        }
        usleep(20000);
      }
      ok = pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    if (ok) {
      alive.push_back(h);
    } else if (!spares_.empty()) {
      Log("host %s does not answer; replaced by spare %s", h.c_str(), spares_.front().c_str());
      alive.push_back(spares_.front());
      spares_.erase(spares_.begin());
    } else {
      Log("host %s does not answer and no spare is left; going on without it", h.c_str());
    }
  }
  hosts_ = alive;
}

// The generations this attempt wrote that probably hold the failure (run_policy.h), passed over before the
// relaunch instead of after a failed one.
void Supervisor::PassOverSuspects() {
  std::vector<uint64_t> gens;
  if (!coord::ListCompleteGenerations(Env::Default(), t_.ckpt_dir, &gens).ok()) return;
  std::vector<coord::Manifest> ms;
  for (auto it = gens.rbegin(); it != gens.rend(); ++it) {
    if (*it < gen_at_start_ || *it <= floor_) continue;
    coord::Manifest m;
    if (coord::ReadManifest(Env::Default(), coord::GenerationDir(t_.ckpt_dir, *it) + "/MANIFEST.json", &m).ok())
      ms.push_back(std::move(m));
  }
  std::string why;
  constexpr double kWindow = 3;  // seconds: a launcher's time to notice a dead process, with margin
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  std::vector<uint64_t> bad = SuspectGenerations(ms, double(now.tv_sec) + double(now.tv_nsec) * 1e-9, kWindow, &why);
  if (bad.empty()) return;
  std::string list;
  for (uint64_t g : bad) {
    choice_.Exclude(g);
    list += (list.empty() ? "" : ", ") + std::to_string(g);
  }
  Log("passing generation%s %s over: %s, and it completed within %.0f s of the failure (it may hold it)",
      bad.size() > 1 ? "s" : "", list.c_str(), why.c_str(), kWindow);
}

void Supervisor::MarkDone() {
  std::string text = std::to_string(NewestGeneration()) + "\n";
  Status s = WriteFileAtomic(Env::Default(), done_marker_, text);
  if (!s.ok()) Log("warning: %s", s.message().c_str());
}

int Supervisor::Run() {
  t0_ = Now();
  Status s = Prepare();
  if (!s.ok()) {
    fprintf(stderr, "revive run: %s\n", s.message().c_str());
    return 2;
  }
  int ckpt_sig = 0;
  s = ParseCheckpointSignal(a_.ckpt_signal.empty() && getenv("REVIVE_CHECKPOINT_SIGNAL") != nullptr
                                ? getenv("REVIVE_CHECKPOINT_SIGNAL") : a_.ckpt_signal, &ckpt_sig);
  if (!s.ok()) {
    fprintf(stderr, "revive run: %s\n", s.message().c_str());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) if (sig != ckpt_sig) sigaction(sig, &sa, nullptr);
  sa.sa_handler = OnCkptSignal;
  if (ckpt_sig > 0) sigaction(ckpt_sig, &sa, nullptr);
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  for (;;) {
    std::vector<uint64_t> gens;
    (void)coord::ListCompleteGenerations(Env::Default(), t_.ckpt_dir, &gens);
    gens.erase(std::remove_if(gens.begin(), gens.end(), [this](uint64_t g) { return g <= floor_; }), gens.end());
    uint64_t from = a_.app ? 0 : choice_.Pick(gens);
    if (!a_.app && from == 0 && !gens.empty()) {
      Log("giving up: no checkpoint brings the job back (each of generations %llu..%llu failed %u time%s in a row)",
          (unsigned long long)gens.back(), (unsigned long long)gens.front(), kTriesPerGeneration,
          kTriesPerGeneration == 1 ? "" : "s");
      return kGaveUp;
    }
    s = StartAttempt(from);
    if (!s.ok()) {
      Log("giving up: %s", s.message().c_str());
      return kGaveUp;
    }
    std::string what;
    Event e = Watch(&what);
    switch (e) {
      case Event::kDone:
        Log("the job finished (%u restart%s)", failures_, failures_ == 1 ? "" : "s");
        if (!a_.app) Teardown();  // the coordinator
        MarkDone();
        return 0;
      case Event::kStop: {
        int sig = g_stop;
        Log("%s: stopping the job", strsignal(sig));
        Teardown();
        return 128 + sig;
      }
      case Event::kCkptSignal: {
        Log("checkpoint signal: checkpointing, then stopping%s", a_.requeue ? " and requeueing" : "");
        int code = kStopped;
        if (!a_.app) {
          double secs = 0;
          bool silent = false;
          std::string err;
          if (TakeCheckpoint(&secs, &silent, &err))
            Log("checkpoint: generation %llu in %.3f s", (unsigned long long)NewestGeneration(), secs);
          else
            Log("the checkpoint failed: %s (a restart takes the previous one)", err.c_str());
        }
        if (a_.requeue) {
          s = SlurmRequeue();  // its error carries scontrol's stderr
          if (s.ok()) Log("requeued Slurm job %s", getenv("SLURM_JOB_ID"));
          else Log("%s", s.message().c_str());
        }
        Teardown();
        return code;
      }
      case Event::kFailed:
      case Event::kHung: {
        // A relaunch from generation G that failed before writing a newer one passes G over (RestartChoice):
        // G may hold the failure itself, since generations completed between a process's death and its
        // detection (an MPI launcher takes about a second to notice) record the dead process. Such a
        // failure does not use up --restarts: each generation is passed over once, so this ends too.
        const bool passed_over = from != 0 && NewestGeneration() <= gen_at_start_;
        if (passed_over) {
          choice_.Failed(from);
          Log("relaunch from generation %llu failed before its first checkpoint (%s); passing that generation over",
              (unsigned long long)from, what.c_str());
        } else {
          failures_++;
          Log("failure %u: %s", failures_, what.c_str());
        }
        if (!a_.app) PassOverSuspects();
        Teardown();
        if (failures_ > unsigned(a_.restarts)) {
          Log("giving up after %u failures (--restarts %ld)", failures_, a_.restarts);
          return kGaveUp;
        }
        ProbeHosts();
        if (!WantsHosts(a_.ho) || !hosts_.empty()) break;
        Log("giving up: no host left");
        return kGaveUp;
      }
    }
  }
}

}  // namespace

void AddRunCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand("run", "Run a job under supervision: restart it from its newest checkpoint when it fails");
  c->footer(
      "Launches COMMAND (transparent: under `revive launch`; --app: as is, for programs using the\n"
      "application-level library), watches it and relaunches it from the newest checkpoint that can be\n"
      "restored when a process dies, hangs or a host is lost, up to --restarts times (docs/run.md).\n"
      "Exit: 0 finished, 70 gave up, 75 stopped on the checkpoint signal, 128+N ended by signal N, 2 usage.\n"
      "Example: revive run --restarts 5 --interval auto --mtbf 3600 -- mpiexec -n 4 ./solver\n"
      "         revive run --app --hang-timeout 120 -- mpiexec -n 4 ./heat2d --levels L1+L3,L4@10");
  c->add_option("--restarts", a->restarts, "Relaunches allowed before giving up (default 3)");
  c->add_option("--interval", a->interval,
                "Checkpoint every SECONDS, or `auto` (Daly's interval from the measured checkpoint cost and "
                "--mtbf); with --app passed on as REVIVE_CP_INTERVAL (default 0: none)");
  c->add_option("--mtbf", a->mtbf, "Mean time between failures to assume (seconds) until failures are observed");
  c->add_option("--hang-timeout", a->hang_timeout,
                "A process that does not answer a checkpoint (transparent), or a rank whose heartbeat does not "
                "advance (--app), for this many seconds is hung (default 0: not watched)");
  c->add_flag("--app", a->app, "COMMAND uses the application-level library: run it as is; it restarts itself");
  c->add_flag("--fresh", a->fresh, "Do not restart from checkpoints already in the directory");
  c->add_option("--port", a->port, "Coordinator port (default: REVIVE_PORT, else 7779, or a free port when 7779 serves another computation: docs/cli.md)");
  c->add_option("--ckpt-dir", a->ckpt_dir, "Checkpoint directory (default: REVIVE_CKPT_DIR or ./revive-ckpt)");
  c->add_option("--hosts", a->ho.hosts, "Comma-separated hosts (docs/hosts.md); with --app, {hosts} in COMMAND");
  AddHostOptions(c, &a->ho);
  c->add_option("--spares", a->spares, "The last K hosts are spares: they replace hosts that are lost");
  c->add_option("-n", a->n, "Number of copies of COMMAND (transparent)");
  c->add_flag("--compress", a->compress, "Compress images (transparent)");
  c->add_flag("--fork", a->fork, "Write images from a forked child (transparent)");
  c->add_option("--checkpoint-signal", a->ckpt_signal,
                "SIG (e.g. USR1): checkpoint, stop the job and exit 75 (Slurm's --signal=B:USR1@T)");
  c->add_flag("--requeue", a->requeue, "With the checkpoint signal inside Slurm: scontrol requeue the job");
  c->add_option("command", a->argv, "-- COMMAND ARGS...")->required();
  c->positionals_at_end();
  c->callback([a, rc] { *rc = Supervisor(*a).Run(); });
}

}  // namespace revive::cli
