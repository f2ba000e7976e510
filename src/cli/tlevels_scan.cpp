// `revive tlevels-scan` on every host through the launcher (tlevels_scan.h).
#include "cli/tlevels_scan.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "coord/tlevels.h"

namespace revive::cli {

std::string ReadLineFd(int fd) {
  std::string out;
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') return out;
    out.push_back(c);
  }
}

std::string ReadAllFd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  return out;
}

int WaitStatus(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return 1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::map<std::string, HostPieces> ScanHosts(const char* who, const HostOpts& ho, const std::string& self,
                                            const std::set<std::string>& hosts, const std::string& root,
                                            const std::string& job) {
  std::map<std::string, HostPieces> out;
  std::vector<std::pair<std::string, std::pair<pid_t, int>>> running;
  for (const std::string& h : hosts) {
    pid_t pid = -1;
    int fd = -1;
    Status s = StartOnHost(ho, h, {self, "tlevels-scan", coord::THostJobDir(root, h, job)}, &pid, &fd);
    if (!s.ok()) {
      fprintf(stderr, "%s: cannot list the images kept on host %s: %s\n", who, h.c_str(), s.ToString().c_str());
      continue;
    }
    running.push_back({h, {pid, fd}});
  }
  for (auto& [h, pf] : running) {
    std::string text = ReadAllFd(pf.second);
    close(pf.second);
    if (int rc = WaitStatus(pf.first); rc != 0) {
      fprintf(stderr, "%s: listing the images kept on host %s failed (status %d)\n", who,
              h.c_str(), rc);
      continue;
    }
    HostPieces& hp = out[h];
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      std::string line = text.substr(pos, nl - pos);
      pos = nl + 1;
      char kind[8] = "", a[512] = "", b[512] = "", c[512] = "";
      unsigned long long g = 0;
      uint64_t x = 0;
      int n = sscanf(line.c_str(), "%7s %llu %511s %511s %511s", kind, &g, a, b, c);
      if (n == 4 && std::string(kind) == "own" && coord::ParseHex64(b, &x)) hp.own[g][a] = x;
      if (n == 5 && std::string(kind) == "copy" && coord::ParseHex64(c, &x)) hp.copy[g][a][b] = x;
      if (n == 3 && std::string(kind) == "parity") hp.parity[g] = std::string(a) == "ok";
    }
  }
  return out;
}

}  // namespace revive::cli
