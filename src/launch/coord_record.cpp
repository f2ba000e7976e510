#include "launch/coord_record.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace revive::launch {
namespace {

std::string HostName() {
  char h[256] = "";
  if (gethostname(h, sizeof h) != 0) return "?";
  h[sizeof h - 1] = 0;
  return h;
}

// kill(pid, 0) also succeeds for a zombie (a killed daemon whose reaper has not waited for it yet).
bool Alive(long pid) {
  if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return false;
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  size_t paren = all.rfind(')');
  return paren == std::string::npos || paren + 2 >= all.size() || (all[paren + 2] != 'Z' && all[paren + 2] != 'X');
}

std::map<std::string, std::string> ReadRecord(const std::string& path) {
  std::ifstream f(path);
  std::map<std::string, std::string> kv;
  std::string line;
  while (std::getline(f, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

}  // namespace

std::string CoordRecordPath(const std::string& ckpt_dir, unsigned port) {
  return ckpt_dir + "/.revive-coord-" + std::to_string(port);
}

void WriteCoordRecord(const std::string& ckpt_dir, unsigned port, const std::string& bind,
                      const std::string& parent) {
  std::string path = CoordRecordPath(ckpt_dir, port), tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return;
    f << "pid=" << getpid() << "\nhost=" << HostName() << "\nbind=" << bind << "\nport=" << port
      << "\nstarted=" << time(nullptr) << "\nparent=" << parent << "\n";
    if (!f) return;
  }
  (void)!rename(tmp.c_str(), path.c_str());
}

void RemoveCoordRecord(const std::string& ckpt_dir, unsigned port) {
  (void)!unlink(CoordRecordPath(ckpt_dir, port).c_str());
}

unsigned LiveCoordPort(const std::string& ckpt_dir) {
  DIR* d = opendir(ckpt_dir.c_str());
  if (d == nullptr) return 0;
  const std::string prefix = ".revive-coord-";
  unsigned best = 0;
  long long best_started = -1;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0 || name.find('.', prefix.size()) != std::string::npos) continue;
    std::map<std::string, std::string> kv = ReadRecord(ckpt_dir + "/" + name);
    const long pid = atol(kv["pid"].c_str());
    const long port = atol(kv["port"].c_str());
    const long long started = atoll(kv["started"].c_str());
    if (pid <= 0 || port <= 0 || port > 65535 || !kv["parent"].empty() || kv["host"] != HostName() || !Alive(pid))
      continue;
    if (started > best_started) best = unsigned(port), best_started = started;
  }
  closedir(d);
  return best;
}

std::string DescribeLostCoordinator(const std::string& ckpt_dir, unsigned port) {
  std::map<std::string, std::string> kv = ReadRecord(CoordRecordPath(ckpt_dir, port));
  if (kv.empty()) return "";
  long pid = atol(kv["pid"].c_str());
  if (pid <= 0) return "";
  std::string where = "pid " + kv["pid"] + " on " + kv["host"] + " (" + kv["bind"] + ":" + kv["port"] + ")";
  time_t started = (time_t)atoll(kv["started"].c_str());
  char when[64] = "?";
  struct tm tm;
  if (started > 0 && gmtime_r(&started, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  bool same_host = kv["host"] == HostName();
  bool alive = same_host && Alive(pid);
  std::string state = !same_host ? "does not answer (it ran on another host)"
                      : alive    ? "is still alive but does not answer"
                                 : "ended without shutting down (killed?)";
  return "the coordinator is lost: " + where + ", started " + when + ", " + state +
         ". Its processes run on without checkpoints; once they have stopped, `revive restart " + ckpt_dir +
         "` continues from the newest complete checkpoint";
}

}  // namespace revive::launch
