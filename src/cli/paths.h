// Finding revive's helper files and resolving user-given paths.
#pragma once

#include <string>

#include "core/status.h"

namespace revive::cli {

// Directory holding the running `revive` binary (from /proc/self/exe).
std::string SelfExeDir();

// A helper installed next to revive, e.g. FindHelper("REVIVE_INJECT_LIB", "inject", "librevive_inject.so"):
// 1. $env_override if set (must exist), 2. build tree: <exe_dir>/../<build_subdir>/<file>,
// 3. installed: <exe_dir>/../lib/revive/<file>. The error lists every place looked at.
Status FindHelper(const char* env_override, const char* build_subdir, const char* file, std::string* out);
// Candidate list of FindHelper without the environment, for tests and messages.
std::string BuildTreeCandidate(const std::string& exe_dir, const char* build_subdir, const char* file);
std::string InstalledCandidate(const std::string& exe_dir, const char* file);

// Absolute form of path (relative to the cwd), without requiring it to exist.
std::string Absolute(const std::string& path);

// Resolves a program name like execvp does (PATH search when it has no '/').
Status FindProgram(const std::string& prog, std::string* path);

// True if the ELF file at path has a PT_INTERP header (it is dynamically linked, so LD_PRELOAD works).
// Errors: unreadable, not ELF, truncated — each naming the file.
Status IsDynamicElf(const std::string& path, bool* dynamic);

}  // namespace revive::cli
