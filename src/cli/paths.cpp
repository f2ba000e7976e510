#include "cli/paths.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace revive::cli {
namespace {

bool IsFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Status ReadAt(int fd, void* buf, size_t n, off_t off, const std::string& path, const char* what) {
  ssize_t r = pread(fd, buf, n, off);
  if (r < 0) return Status::FromErrno(path, errno);
  if ((size_t)r != n) return Status::InvalidArgument(path + ": truncated ELF file (" + what + ")");
  return Status::OK();
}

// Program headers of a 32- or 64-bit ELF, looking for PT_INTERP. Both classes share the logic; only the
// struct layouts differ.
template <typename Ehdr, typename Phdr>
Status HasInterp(int fd, const std::string& path, bool* dynamic) {
  Ehdr eh;
  Status s = ReadAt(fd, &eh, sizeof eh, 0, path, "header");
  if (!s.ok()) return s;
  if (eh.e_phentsize != sizeof(Phdr) && eh.e_phnum != 0)
    return Status::InvalidArgument(path + ": bad ELF program header size");
  if (eh.e_phnum > 4096) return Status::InvalidArgument(path + ": implausible ELF program header count");
  *dynamic = false;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Phdr ph;
    s = ReadAt(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof(Phdr)), path, "program headers");
    if (!s.ok()) return s;
    if (ph.p_type == PT_INTERP) *dynamic = true;
  }
  return Status::OK();
}

}  // namespace

std::string SelfExeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string p(buf);
  return p.substr(0, p.find_last_of('/'));
}

std::string BuildTreeCandidate(const std::string& exe_dir, const char* build_subdir, const char* file) {
  return exe_dir + "/../" + build_subdir + "/" + file;
}

std::string InstalledCandidate(const std::string& exe_dir, const char* file) {
  return exe_dir + "/../lib/revive/" + file;
}

Status FindHelper(const char* env_override, const char* build_subdir, const char* file, std::string* out) {
  const char* e = getenv(env_override);
  if (e != nullptr && *e != '\0') {
    if (!IsFile(e)) return Status::NotFound(std::string(env_override) + "=" + e + ": no such file");
    *out = Absolute(e);
    return Status::OK();
  }
  std::string dir = SelfExeDir();
  std::string msg;
  for (const std::string& c : {BuildTreeCandidate(dir, build_subdir, file), InstalledCandidate(dir, file)}) {
    char real[PATH_MAX];
    if (IsFile(c) && realpath(c.c_str(), real) != nullptr) {
      *out = real;
      return Status::OK();
    }
    msg += (msg.empty() ? "" : ", ") + c;
  }
  return Status::NotFound(std::string(file) + " not found (looked at " + msg + "); set " + env_override);
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  std::string p = path;
  while (p.rfind("./", 0) == 0) p = p.substr(2);
  if (p.empty() || p == ".") return cwd;
  return std::string(cwd) + "/" + p;
}

Status FindProgram(const std::string& prog, std::string* path) {
  if (prog.empty()) return Status::InvalidArgument("no program given");
  if (prog.find('/') != std::string::npos) {
    if (access(prog.c_str(), F_OK) != 0) return Status::FromErrno(prog, errno);
    if (!IsFile(prog)) return Status::InvalidArgument(prog + ": not a regular file");
    if (access(prog.c_str(), X_OK) != 0) return Status::FromErrno(prog, errno);
    *path = Absolute(prog);
    return Status::OK();
  }
  const char* env = getenv("PATH");
  std::string search = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= search.size()) {
    size_t end = search.find(':', start);
    if (end == std::string::npos) end = search.size();
    std::string dir = search.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + prog;
    if (IsFile(cand) && access(cand.c_str(), X_OK) == 0) {
      *path = Absolute(cand);
      return Status::OK();
    }
    start = end + 1;
  }
  return Status::NotFound(prog + ": command not found in PATH");
}

// "#!/bin/sh -e" -> "/bin/sh". Empty if the line has no interpreter.
static std::string ScriptInterpreter(int fd) {
  char line[256] = {0};
  ssize_t n = pread(fd, line, sizeof line - 1, 2);
  if (n <= 0) return "";
  line[n] = '\0';
  char* p = line;
  while (*p == ' ' || *p == '\t') p++;
  char* e = p;
  while (*e && *e != ' ' && *e != '\t' && *e != '\n') e++;
  return std::string(p, e);
}

Status IsDynamicElf(const std::string& path, bool* dynamic) {
  std::string current = path;
  for (int depth = 0; depth < 4; depth++) {  // a script's interpreter is what the kernel really runs
    int fd = open(current.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(current, errno);
    unsigned char ident[EI_NIDENT] = {0};
    ssize_t got = pread(fd, ident, sizeof ident, 0);
    Status s = got < 0 ? Status::FromErrno(current, errno) : Status::OK();
    if (s.ok() && got >= 2 && ident[0] == '#' && ident[1] == '!') {
      std::string interp = ScriptInterpreter(fd);
      close(fd);
      if (interp.empty()) return Status::InvalidArgument(current + ": script without an interpreter");
      current = interp;
      continue;
    }
    if (s.ok() && (got < SELFMAG || memcmp(ident, ELFMAG, SELFMAG) != 0))
      s = Status::InvalidArgument(current + ": not an ELF executable");
    if (s.ok() && got < (ssize_t)sizeof ident) s = Status::InvalidArgument(current + ": truncated ELF file");
    if (s.ok()) {
      if (ident[EI_CLASS] == ELFCLASS64) s = HasInterp<Elf64_Ehdr, Elf64_Phdr>(fd, current, dynamic);
      else if (ident[EI_CLASS] == ELFCLASS32) s = HasInterp<Elf32_Ehdr, Elf32_Phdr>(fd, current, dynamic);
      else s = Status::InvalidArgument(current + ": unknown ELF class");
    }
    close(fd);
    return s;
  }
  return Status::InvalidArgument(path + ": too many nested #! interpreters");
}

}  // namespace revive::cli
