// Can the program an exec is about to run load our library? A statically linked program (Go binaries,
// busybox, `gcc -static`) has no dynamic loader, so LD_PRELOAD does nothing and it never says HELLO;
// a 32-bit program's loader ignores our 64-bit library. Such a program is outside the computation, and
// it must not inherit the coordinator connection: it would hold the process's place there without ever
// answering, and every checkpoint would time out while it runs. Read from the file's headers before
// the exec (program context, not the checkpoint path: libc calls are fine here).
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/proctree/proctree.h"

namespace revive::proctree {
namespace {

#if defined(__x86_64__)
constexpr int kOurMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr int kOurMachine = EM_AARCH64;
#else
constexpr int kOurMachine = -1;  // unknown: only the ELF class is compared
#endif

// The kernel follows at most 4 levels of "#!" interpreters (BINPRM_MAX_RECURSION).
constexpr int kMaxScriptDepth = 4;

bool is_exec_file(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

// execvp's search: a name without '/' is looked up in PATH (glibc's default when unset). Returns false
// when nothing is found (the exec fails anyway).
bool search_path(const char* file, char* out, size_t cap) {
  const char* path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  size_t flen = strlen(file);
  for (const char* p = path;;) {
    const char* end = strchr(p, ':');
    size_t dlen = end ? size_t(end - p) : strlen(p);
    const char* dir = dlen ? p : ".";  // an empty entry is the current directory
    if (!dlen) dlen = 1;
    if (dlen + 1 + flen < cap) {
      memcpy(out, dir, dlen);
      out[dlen] = '/';
      memcpy(out + dlen + 1, file, flen + 1);
      if (is_exec_file(out)) return true;
    }
    if (!end) return false;
    p = end + 1;
  }
}

bool loads(const char* path, int depth) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // unreadable (execute-only...): assume dynamic, as before
  unsigned char head[256];
  ssize_t n = pread(fd, head, sizeof head, 0);
  bool result = true;  // anything we do not understand: assume it loads us
  if (n >= 2 && head[0] == '#' && head[1] == '!') {
    close(fd);
    if (depth >= kMaxScriptDepth) return true;
    char interp[PATH_MAX];
    size_t i = 2, k = 0;
    while (i < size_t(n) && (head[i] == ' ' || head[i] == '\t')) ++i;
    while (i < size_t(n) && k + 1 < sizeof interp && head[i] != ' ' && head[i] != '\t' && head[i] != '\n')
      interp[k++] = char(head[i++]);
    interp[k] = 0;
    return k == 0 || loads(interp, depth + 1);
  }
  if (n >= EI_NIDENT && memcmp(head, ELFMAG, SELFMAG) == 0) {
    if (head[EI_CLASS] != ELFCLASS64 || size_t(n) < sizeof(Elf64_Ehdr)) {
      result = false;  // a 32-bit program cannot load our 64-bit library
    } else {
      Elf64_Ehdr eh;
      memcpy(&eh, head, sizeof eh);
      if (kOurMachine >= 0 && eh.e_machine != kOurMachine) {
        result = false;
      } else if (eh.e_phentsize == sizeof(Elf64_Phdr)) {
        result = false;  // no PT_INTERP: statically linked (static-pie included)
        for (unsigned k = 0; k < eh.e_phnum; ++k) {
          Elf64_Phdr ph;
          if (pread(fd, &ph, sizeof ph, off_t(eh.e_phoff + uint64_t(k) * sizeof ph)) != ssize_t(sizeof ph)) {
            result = true;
            break;
          }
          if (ph.p_type == PT_INTERP) {
            result = true;
            break;
          }
        }
      }
    }
  }
  close(fd);
  return result;
}

}  // namespace

bool program_loads_library(const char* file, bool search, char* resolved, size_t cap) {
  if (cap) resolved[0] = 0;
  if (!file || !*file) return true;
  if (search && !strchr(file, '/')) {
    if (!search_path(file, resolved, cap)) return true;
  } else if (strlen(file) < cap) {
    strcpy(resolved, file);
  }
  return loads(resolved[0] ? resolved : file, 0);
}

}  // namespace revive::proctree
