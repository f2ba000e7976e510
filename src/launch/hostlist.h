// Host lists: `--hosts a,b,c` or a host file (one host per line; blank lines and `#` comments ignored;
// `host slots=N` repeats the host N times, like Open MPI's hostfile). Process i goes to host i mod n.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace revive::launch {

// "a,b,,c" -> {a,b,"",c} (one entry per comma-separated field; "" -> {""}).
std::vector<std::string> SplitCommas(const std::string& list);

// "a,b,c" -> {a,b,c}. Empty entries and characters outside [A-Za-z0-9._:@-] are errors naming the entry.
Status ParseHostList(const std::string& list, std::vector<std::string>* hosts);

// Errors name the file and line.
Status ReadHostFile(const std::string& path, std::vector<std::string>* hosts);

// Placement of `n` processes (manifest order) on `hosts`: round robin.
std::vector<std::string> Place(const std::vector<std::string>& hosts, size_t n);

}  // namespace revive::launch
