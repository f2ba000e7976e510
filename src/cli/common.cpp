#include "cli/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/paths.h"
#include "coord/secret.h"
#include "core/env.h"
#include "launch/coord_record.h"

namespace revive::cli {

std::string DefaultCkptDir() {
  const char* e = getenv("REVIVE_CKPT_DIR");
  return e != nullptr && *e ? e : "revive-ckpt";
}

Status ResolveTarget(const std::string& port_opt, const std::string& dir_opt, Target* t) {
  const char* h = getenv("REVIVE_COORD_HOST");
  t->host = h != nullptr && *h ? h : "127.0.0.1";
  std::string port = port_opt;
  std::string what = "--port";
  if (port.empty()) {
    const char* e = getenv("REVIVE_PORT");
    if (e != nullptr && *e) {
      port = e;
      what = "REVIVE_PORT";
    }
  }
  t->port = kDefaultPort;
  t->port_explicit = !port.empty();
  if (!port.empty()) {
    char* end = nullptr;
    errno = 0;
    long v = strtol(port.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < 1 || v > 65535)
      return Status::InvalidArgument(what + "=" + port + ": not a port number (1..65535)");
    t->port = (uint16_t)v;
  }
  std::string dir = dir_opt.empty() ? DefaultCkptDir() : dir_opt;
  t->ckpt_dir = Absolute(dir);
  while (t->ckpt_dir.size() > 1 && t->ckpt_dir.back() == '/') t->ckpt_dir.pop_back();
  t->secret_file = coord::SecretPath(t->ckpt_dir);
  return Status::OK();
}

namespace {

// The coordinator's address for t (its host as a dotted IPv4 address, "localhost" as loopback) and port;
// false when the host is not such an address (a name: callers treat it as "someone may listen there").
bool CoordAddr(const Target& t, uint16_t port, sockaddr_in* a) {
  *a = sockaddr_in{};
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  return inet_pton(AF_INET, t.host == "localhost" ? "127.0.0.1" : t.host.c_str(), &a->sin_addr) == 1;
}

}  // namespace

bool Listening(const Target& t) {
  sockaddr_in a;
  if (!CoordAddr(t, t.port, &a)) return true;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = connect(fd, (sockaddr*)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

LaunchLock::LaunchLock(const std::string& ckpt_dir) {
  if (ckpt_dir.empty()) return;
  fd_ = open((ckpt_dir + "/.revive-launch.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  while (fd_ >= 0 && flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

void LaunchLock::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void PreferRecordedPort(Target* t) {
  if (t->port_explicit) return;
  const unsigned p = launch::LiveCoordPort(t->ckpt_dir);
  if (p != 0) t->port = uint16_t(p);
}

namespace {

// A port nobody listens on now, on the address the coordinator will bind (loopback unless
// REVIVE_COORD_HOST names another): the kernel picks it from the ephemeral range.
Status FreePort(const Target& t, uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  sockaddr_in a;
  if (!CoordAddr(t, 0, &a)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = bind(fd, (sockaddr*)&a, sizeof a) == 0 && getsockname(fd, (sockaddr*)&a, &len) == 0;
  const int e = errno;
  close(fd);
  if (!ok) return Status::FromErrno("choosing a free port", e);
  *port = ntohs(a.sin_port);
  return Status::OK();
}

}  // namespace

Status AvoidForeignPort(Target* t, const char* who) {
  if (t->port_explicit || !Listening(*t)) return Status::OK();
  coord::Client c;
  Status s = ConnectCli(*t, 2000, &c);
  // Only a coordinator that refuses our secret is someone else's: a slow or busy one of ours must not
  // split the computation over two coordinators.
  if (s.ok() || s.message().find("authentication failed") == std::string::npos) return Status::OK();
  const uint16_t was = t->port;
  s = FreePort(*t, &t->port);
  if (!s.ok()) return s;
  fprintf(stderr, "%s: port %u serves another computation (not %s); this one uses port %u "
          "(`revive checkpoint/status/kill --ckpt-dir %s` find it)\n", who, unsigned(was), t->ckpt_dir.c_str(),
          unsigned(t->port), t->ckpt_dir.c_str());
  return Status::OK();
}

Status ConnectCli(const Target& t, int connect_timeout_ms, coord::Client* c) {
  coord::ClientOptions o;
  o.host = t.host.c_str();
  o.port = t.port;
  o.secret_file = t.secret_file.c_str();
  o.role = "cli";
  o.prog = "revive";
  o.connect_timeout_ms = connect_timeout_ms;
  if (!Listening(t))  // NotFound: callers tell "nobody there (yet)" from a failure by the code
    return Status::NotFound("no coordinator is listening on " + t.host + ":" + std::to_string(t.port) +
                            " (is a computation running? start one with `revive launch`)");
  if (c->connect(o, nullptr)) return Status::OK();
  std::string msg = c->error();
  if (msg.find("authentication failed") != std::string::npos)
    msg += " (the coordinator belongs to another computation: its secret is not " + t.secret_file +
           "; use --port or --ckpt-dir)";
  else if (msg.find("secret file") != std::string::npos)
    msg += " (is " + t.ckpt_dir + " the computation's checkpoint directory? use --ckpt-dir)";
  return Status::IOError(msg);
}

Status EnsureCoordinator(const Target& t, const std::vector<std::string>& extra_args) {
  if (!Listening(t)) {
    std::vector<std::string> args = {"/proc/self/exe", "coordinator", "--daemon", "--exit-on-last",
                                     "--port", std::to_string(t.port), "--ckpt-dir", t.ckpt_dir};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    // REVIVE_COORD_HOST names where processes reach the coordinator (e.g. a bridge address other network
    // namespaces or hosts can route to): listen there, not only on loopback.
    struct in_addr a4;
    if (t.host != "127.0.0.1" && inet_pton(AF_INET, t.host.c_str(), &a4) == 1) {
      args.push_back("--bind");
      args.push_back(t.host);
    }
    Progress("revive: starting a coordinator on port " + std::to_string(t.port));
    // Its complaints go through a pipe: when two launches race to start the same coordinator, the
    // loser's "address already in use" is not an error (the winner is listening), so it is not shown.
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
    pid_t pid = fork();
    if (pid < 0) return Status::FromErrno("fork", errno);
    if (pid == 0) {
      dup2(err_pipe[1], 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      fprintf(stderr, "revive: exec /proc/self/exe coordinator: %s\n", strerror(errno));
      _exit(127);
    }
    close(err_pipe[1]);
    std::string complaint = ReadAll(err_pipe[0]);
    close(err_pipe[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    // The daemon's foreground parent exits 0 only once the coordinator listens.
    if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && !Listening(t)) {
      while (!complaint.empty() && complaint.back() == '\n') complaint.pop_back();
      return Status::IOError("could not start a coordinator on port " + std::to_string(t.port) +
                             (complaint.empty() ? "" : ": " + complaint));
    }
  }
  ScopedClient sc;
  return ConnectCli(t, 5000, &sc.c);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, (size_t)n);
  return out;
}

void Progress(const std::string& line) {
  if (isatty(2)) fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace revive::cli
