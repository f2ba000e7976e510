#include "launch/hostlist.h"

#include <errno.h>

#include <fstream>
#include <sstream>

namespace revive::launch {
namespace {

// Host names end up in launcher argv and in `env REVIVE_HOST_ID=...`: keep them to a safe alphabet so
// no host name can smuggle shell syntax into a {cmdq} expansion.
bool ValidHost(const std::string& h) {
  if (h.empty() || h.size() > 63) return false;
  for (char c : h)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-' || c == ':' || c == '@'))
      return false;
  return true;
}

}  // namespace

std::vector<std::string> SplitCommas(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

Status ParseHostList(const std::string& list, std::vector<std::string>* hosts) {
  hosts->clear();
  for (const std::string& h : SplitCommas(list)) {
    if (!ValidHost(h))
      return Status::InvalidArgument("--hosts \"" + list + "\": host \"" + h +
                                     "\" is empty, longer than 63 bytes or has characters outside [A-Za-z0-9._:@-]");
    hosts->push_back(h);
  }
  return Status::OK();
}

Status ReadHostFile(const std::string& path, std::vector<std::string>* hosts) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno("host file " + path, errno);
  hosts->clear();
  std::string line;
  for (int no = 1; std::getline(in, line); no++) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host, opt;
    if (!(words >> host)) continue;
    std::string where = path + ":" + std::to_string(no) + ": ";
    if (!ValidHost(host))
      return Status::InvalidArgument(where + "host \"" + host + "\" has characters outside [A-Za-z0-9._:@-]");
    long slots = 1;
    while (words >> opt) {
      char* end = nullptr;
      if (opt.rfind("slots=", 0) != 0 || (slots = strtol(opt.c_str() + 6, &end, 10)) < 1 || slots > 100000 ||
          *end != '\0')
        return Status::InvalidArgument(where + "\"" + opt + "\" is not slots=N (N >= 1)");
    }
    for (long i = 0; i < slots; i++) hosts->push_back(host);
  }
  if (hosts->empty()) return Status::InvalidArgument("host file " + path + ": no hosts");
  return Status::OK();
}

std::vector<std::string> Place(const std::vector<std::string>& hosts, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n && !hosts.empty(); i++) out.push_back(hosts[i % hosts.size()]);
  return out;
}

}  // namespace revive::launch
