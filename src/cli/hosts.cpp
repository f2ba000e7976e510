#include "cli/hosts.h"
#include "cli/ckpt_signal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "coord/tlevels.h"
#include "launch/hostlist.h"
#include "launch/launcher.h"
#include "launch/slurm_hostlist.h"

namespace revive::cli {

void AddHostOptions(CLI::App* c, HostOpts* o) {
  c->add_option("--hostfile", o->hostfile, "File with one host per line (`host slots=N` repeats it)");
  c->add_option("--launcher", o->launcher,
                "How to run a host's part: ssh (default with --hosts), srun (default with --hosts slurm), netns, local, or a template such as "
                "'ip netns exec {host} {cmd}', 'srun -w {host} -N1 -n1 {cmd}' or 'ssh {host} {cmdq}' "
                "(docs/hosts.md)");
  c->add_option("--sub-port", o->sub_port,
                "With more than one host: port of the first host's sub-coordinator, host k uses it + k "
                "(default: coordinator port + 1)");
}

void AddLevelsOption(CLI::App* c, std::string* levels) {
  c->add_option("--levels", *levels,
                "SPEC: REVIVE_LEVELS for this computation, e.g. L1+L2,L4@4: each host keeps its images (one host: "
                "L1 and L4 only; docs/storage-levels.md, Transparent images)");
}

Status ApplyLevels(const std::string& levels) {
  if (!levels.empty()) setenv("REVIVE_LEVELS", levels.c_str(), 1);
  coord::TLevelsConfig c;
  return coord::LoadTLevelsConfig(&c);
}

std::string LauncherOf(const HostOpts& o) {
  if (!o.launcher.empty()) return o.launcher;
  return o.hosts == "slurm" ? "srun" : "ssh";  // inside an allocation srun reaches its nodes; ssh may not
}

bool WantsHosts(const HostOpts& o) { return !o.hosts.empty() || !o.hostfile.empty() || !o.launcher.empty(); }

Status ResolveHosts(const HostOpts& o, std::vector<std::string>* hosts) {
  if (!o.hosts.empty() && !o.hostfile.empty())
    return Status::InvalidArgument("--hosts and --hostfile contradict each other");
  if (o.hosts == "slurm") {  // the allocation's nodes, one entry each
    const char* list = getenv("SLURM_JOB_NODELIST");
    if (!list || !*list)
      return Status::InvalidArgument("--hosts slurm: SLURM_JOB_NODELIST is not set (not inside a Slurm allocation)");
    Status s = launch::ExpandSlurmHostList(list, hosts);
    return s.ok() ? s : Status::InvalidArgument("--hosts slurm: SLURM_JOB_NODELIST: " + s.message());
  }
  Status s = !o.hosts.empty()      ? launch::ParseHostList(o.hosts, hosts)
             : !o.hostfile.empty() ? launch::ReadHostFile(o.hostfile, hosts)
                                   : Status::OK();
  if (!s.ok()) return s;
  if (hosts->empty()) *hosts = {""};  // --launcher alone: same template for every part, no host
  return Status::OK();
}

Status CheckLauncher(const HostOpts& o, const std::string& some_host) {
  std::vector<std::string> argv;
  return launch::Expand(launch::ResolveTemplate(LauncherOf(o)), some_host, {"revive"}, &argv);
}

Status SelfPath(std::string* out) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return Status::FromErrno("readlink /proc/self/exe", errno);
  out->assign(buf, size_t(n));
  return Status::OK();
}

namespace {

// A part's report (WriteStatusFile), appended to *out; false when missing or not in that format.
bool ReadStatusFile(const std::string& path, std::vector<RootStatus>* out) {
  FILE* f = fopen(path.c_str(), "re");
  if (!f) return false;
  std::vector<RootStatus> got;
  unsigned long pos = 0;
  int st = 0, n = 0;
  while ((n = fscanf(f, "%lu %d\n", &pos, &st)) == 2) got.push_back({size_t(pos), st});
  bool ok = n == EOF && !ferror(f) && !got.empty();
  fclose(f);
  if (ok) out->insert(out->end(), got.begin(), got.end());
  return ok;
}

}  // namespace

Status WriteStatusFile(const std::string& path, const std::vector<RootStatus>& s) {
  std::string text;
  for (const RootStatus& r : s) text += std::to_string(r.pos) + " " + std::to_string(r.status) + "\n";
  std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "we");
  if (!f) return Status::FromErrno("status file " + tmp, errno);
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmp.c_str());
    return Status::FromErrno("status file " + path, e);
  }
  return Status::OK();
}

int FirstNonZero(std::vector<RootStatus> s) {
  std::stable_sort(s.begin(), s.end(), [](const RootStatus& a, const RootStatus& b) { return a.pos < b.pos; });
  for (const RootStatus& r : s)
    if (r.status != 0) return r.status;
  return 0;
}

int RunHostParts(const char* who, const HostOpts& o, const Target& root, const std::vector<HostPart>& parts,
                 const std::function<bool(const HostPart&, int)>& on_fail) {
  auto fail = [who](const std::string& m) {
    fprintf(stderr, "%s: %s\n", who, m.c_str());
    return 2;
  };
  std::string self;
  Status s = SelfPath(&self);
  if (!s.ok()) return fail(s.message());
  long sub_port = root.port + 1;
  if (!o.sub_port.empty()) {
    char* end = nullptr;
    sub_port = strtol(o.sub_port.c_str(), &end, 10);
    if (*end != '\0' || sub_port < 1 || sub_port > 65535)
      return fail("--sub-port " + o.sub_port + ": not a port number (1..65535)");
  }
  if (parts.size() > 1 && sub_port + long(parts.size()) - 1 > 65535)
    return fail("--sub-port " + std::to_string(sub_port) + ": " + std::to_string(parts.size()) +
                " sub-coordinator ports from there do not fit below 65536");
  std::string tmpl = launch::ResolveTemplate(LauncherOf(o));
  if (parts.size() > 1 && tmpl != "{cmd}" && (root.host == "127.0.0.1" || root.host == "localhost"))
    fprintf(stderr,
            "%s: warning: the coordinator is at %s, which other hosts cannot reach; set REVIVE_COORD_HOST to "
            "an address of this host that they can\n",
            who, root.host.c_str());
  // Each part reports its roots' statuses here (the checkpoint directory is shared by every host, like
  // the images). Not through a coordinator: they exit when the last process leaves, which is exactly
  // when the statuses become known; not on the part's stdout: that is the program's.
  std::vector<std::string> status_files;
  for (size_t k = 0; k < parts.size(); k++) {
    status_files.push_back(root.ckpt_dir + "/.revive-status-" + std::to_string(getpid()) + "-" + std::to_string(k));
    unlink(status_files.back().c_str());
  }
  std::vector<std::vector<std::string>> argvs;
  for (size_t k = 0; k < parts.size(); k++) {
    // ssh and srun do not forward our environment: the command carries it (`env K=V ... revive ...`).
    std::vector<std::string> cmd = {"env", "REVIVE_COORD_HOST=" + root.host,
                                    "REVIVE_COORD_PORT=" + std::to_string(root.port),
                                    "REVIVE_SECRET_FILE=" + root.secret_file, "REVIVE_CKPT_DIR=" + root.ckpt_dir};
    if (!parts[k].host.empty()) cmd.push_back("REVIVE_HOST_ID=" + parts[k].host);
    for (const char* v : {"REVIVE_LOG", "REVIVE_SIGNAL", "REVIVE_INJECT_LIB", "REVIVE_RESTART_BIN",
                          "REVIVE_PHASE_TIMEOUT", "REVIVE_FAIL_FAST", "REVIVE_IB2TCP"})
      if (const char* val = getenv(v)) cmd.push_back(std::string(v) + "=" + val);
    cmd.push_back(self);
    cmd.insert(cmd.end(), parts[k].args.begin(), parts[k].args.end());
    // Placement options go after the subcommand's name (args[0]) and before its other arguments.
    std::vector<std::string> where;
    if (parts.size() > 1)
      where = {"--parent", root.host + ":" + std::to_string(root.port), "--port", std::to_string(sub_port + long(k))};
    else
      where = {"--port", std::to_string(root.port)};
    where.insert(where.end(), {"--status-file", status_files[k]});
    cmd.insert(cmd.begin() + ptrdiff_t(cmd.size() - parts[k].args.size() + 1), where.begin(), where.end());
    std::vector<std::string> argv;
    s = launch::Expand(tmpl, parts[k].host, cmd, &argv);
    if (!s.ok()) return fail(s.message());
    argvs.push_back(std::move(argv));
  }
  std::vector<pid_t> kids;
  for (auto& argv : argvs) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      for (pid_t k : kids) kill(k, SIGTERM);
      return 1;
    }
    if (pid == 0) {
      signal(SIGPIPE, SIG_DFL);
      ExecArgv(argv, std::string(who) + ": launcher");
    }
    kids.push_back(pid);
  }
  // In the order they end, so a failure is noticed while the other parts still run.
  std::vector<int> codes(kids.size(), 0);
  size_t left = kids.size();
  int abort_code = -1;
  while (left > 0) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    size_t k = 0;
    while (k < kids.size() && kids[k] != pid) k++;
    if (k == kids.size()) continue;  // not a part (nothing else is expected)
    left--;
    codes[k] = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
    if (codes[k] != 0 && abort_code < 0 && left > 0 && on_fail && on_fail(parts[k], codes[k])) abort_code = codes[k];
    if (codes[k] != 0 && left > 0 && FailFast()) {
      // Under `revive run`: a lost host part is the supervisor's to handle now (it tears the rest down).
      fprintf(stderr, "%s: the part on host %s ended with status %d; not waiting for the other hosts (REVIVE_FAIL_FAST)\n",
              who, parts[k].host.c_str(), codes[k]);
      for (const auto& f : status_files) unlink(f.c_str());
      return codes[k];
    }
  }
  std::vector<RootStatus> all;
  for (size_t k = 0; k < parts.size(); k++) {
    if (!ReadStatusFile(status_files[k], &all)) all.push_back({parts[k].first, codes[k]});
    unlink(status_files[k].c_str());
  }
  if (abort_code >= 0) return abort_code;
  return FirstNonZero(std::move(all));
}

namespace {

// KILL to the coordinator on c, and its answer. With a reason the coordinator takes it for a failed
// restart: it leaves once the processes are gone, even if none had connected yet (--exit-on-last).
bool SendKill(coord::Client& c, const std::string& why) {
  coord::FrameHeader h;
  coord::Payload p;
  coord::FrameBuilder k(c.tx_buffer(), coord::Client::kTxCap, coord::kKill, c.next_seq());
  std::string line = why;
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (!line.empty()) k.add_u64("upid", 0).add("why", line.c_str());
  return c.send(k) && c.recv(&h, &p, 10000) == 1;
}

}  // namespace

bool AbortUnfinishedRestart(const Target& root, const HostPart& failed, int status) {
  ScopedClient sc;
  if (!ConnectCli(root, 2000, &sc.c).ok()) return false;
  coord::FrameBuilder b(sc.c.tx_buffer(), coord::Client::kTxCap, coord::kStatusRequest, sc.c.next_seq());
  coord::FrameHeader h;
  coord::Payload p;
  char state[64] = "";
  if (!sc.c.send(b) || sc.c.recv(&h, &p, 10000) != 1 || !p.get_str("state", state, sizeof state) ||
      strncmp(state, "restart", 7) != 0)
    return false;  // the computation is running: the part's status is its processes' own
  fprintf(stderr,
          "revive restart: the part on host %s exited with status %d while the coordinator was still in %s; "
          "its processes will not come back, so the restored processes of the other hosts are stopped\n",
          failed.host.c_str(), status, state);
  return SendKill(sc.c, "");
}

bool KillComputation(const Target& root, const std::string& why) {
  ScopedClient sc;
  return ConnectCli(root, 2000, &sc.c).ok() && SendKill(sc.c, why);
}

std::vector<int> WaitEach(const std::vector<pid_t>& kids) {
  std::vector<int> codes;
  for (pid_t k : kids) {
    int st = 0;
    while (waitpid(k, &st, 0) < 0 && errno == EINTR) {
    }
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1);
  }
  return codes;
}

int WaitAll(const std::vector<pid_t>& kids) {
  for (int c : WaitEach(kids))
    if (c != 0) return c;
  return 0;
}

// Connecting a UDP socket sends nothing, it only picks the route and the local address.
Status AddressTowards(const std::string& parent, std::string* out) {
  size_t colon = parent.rfind(':');
  std::string host = parent.substr(0, colon), port = colon == std::string::npos ? "7779" : parent.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (e != 0) return Status::InvalidArgument("--parent " + parent + ": " + gai_strerror(e));
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in me{};
  socklen_t len = sizeof me;
  bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 && getsockname(fd, (sockaddr*)&me, &len) == 0;
  int err = errno;
  freeaddrinfo(res);
  if (fd >= 0) close(fd);
  if (!ok) return Status::FromErrno("no route from this host to the root coordinator " + parent, err);
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip);
  *out = ip;
  return Status::OK();
}

void ExecArgv(std::vector<std::string>& argv, const std::string& what) {
  std::vector<char*> v;
  for (auto& w : argv) v.push_back(w.data());
  v.push_back(nullptr);
  execvp(v[0], v.data());
  fprintf(stderr, "%s %s: %s\n", what.c_str(), v[0], strerror(errno));
  _exit(127);
}

Status StartOnHost(const HostOpts& o, const std::string& host, const std::vector<std::string>& cmd, pid_t* pid,
                   int* out_fd, int* in_fd) {
  std::vector<std::string> argv;
  Status s = launch::Expand(launch::ResolveTemplate(LauncherOf(o)), host, cmd, &argv);
  if (!s.ok()) return s;
  int p[2], q[2] = {-1, -1};
  if (pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  if (in_fd != nullptr && pipe2(q, O_CLOEXEC) != 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return Status::FromErrno("pipe", e);
  }
  *pid = fork();
  if (*pid < 0) {
    int e = errno;
    for (int f : {p[0], p[1], q[0], q[1]})
      if (f >= 0) close(f);
    return Status::FromErrno("fork", e);
  }
  if (*pid == 0) {
    dup2(p[1], 1);
    if (q[0] >= 0) dup2(q[0], 0);
    signal(SIGPIPE, SIG_DFL);
    ExecArgv(argv, "launcher");
  }
  close(p[1]);
  *out_fd = p[0];
  if (in_fd != nullptr) {
    close(q[0]);
    *in_fd = q[1];
  }
  return Status::OK();
}

Status EnsurePartCoordinator(const std::string& parent, Target* t, const std::vector<std::string>& extra) {
  if (parent.empty()) return EnsureCoordinator(*t, extra);
  // This host's processes connect to the sub on this host; only the sub talks to the root. The sub
  // listens on the host's address toward the root, not loopback: a restored socket publishes the local
  // address of its coordinator connection as where its peers on other hosts reconnect (chan plugin).
  Status s = AddressTowards(parent, &t->host);
  if (!s.ok()) return s;
  (void)extra;  // interval, compression, restart manifest: the root's business
  return EnsureCoordinator(*t, {"--parent", parent});
}

void ExportTarget(const Target& t) {
  setenv("REVIVE_COORD_HOST", t.host.c_str(), 1);
  setenv("REVIVE_COORD_PORT", std::to_string(t.port).c_str(), 1);
  setenv("REVIVE_SECRET_FILE", t.secret_file.c_str(), 1);
  setenv("REVIVE_CKPT_DIR", t.ckpt_dir.c_str(), 1);
}

}  // namespace revive::cli
