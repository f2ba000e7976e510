// What the hosts of a computation whose transparent images are kept on them (docs/storage-levels.md,
// "Transparent images") hold, asked on each host: `revive tlevels-scan` run there through the launcher.
// `revive restart --hosts` chooses each image's source from it; `revive ls/verify --hosts` report it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "cli/hosts.h"

namespace revive::cli {

// What one host's `revive tlevels-scan` reported: own[G][name] and copy[G][owner][name] checksums.
struct HostPieces {
  std::map<uint64_t, std::map<std::string, uint64_t>> own;
  std::map<uint64_t, std::map<std::string, std::map<std::string, uint64_t>>> copy;
  std::map<uint64_t, bool> parity;  // L3: generation -> its parity intact
};

// Every host's pieces, scanned on the hosts in parallel through the launcher (self: this revive binary;
// root/job: where the hosts keep them). A host that cannot be reached, or whose scan fails, is absent
// from the result (said on stderr, prefixed with `who`).
std::map<std::string, HostPieces> ScanHosts(const char* who, const HostOpts& ho, const std::string& self,
                                            const std::set<std::string>& hosts, const std::string& root,
                                            const std::string& job);

// A child's first line on fd (a receiver's IP:PORT; it keeps running, so not to EOF); all of fd to EOF.
std::string ReadLineFd(int fd);
std::string ReadAllFd(int fd);
// waitpid's status as an exit code (128+N for a signal; 1 if it cannot be waited for).
int WaitStatus(pid_t pid);

}  // namespace revive::cli
