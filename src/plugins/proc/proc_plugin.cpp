// proc plugin: resource limits, working directory, umask and the threads' names (comm: what ps, top and
// pkill see; a restored process would otherwise be called "revive-restart"). The environment needs
// nothing: environ and its strings live in ordinary memory, which the image restores.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/proc_fds.h"
#include "plugins/common/section_io.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

constexpr char kTag[] = "RVPR";

const char* const kLimitNames[] = {
    "RLIMIT_CPU",    "RLIMIT_FSIZE", "RLIMIT_DATA",    "RLIMIT_STACK",   "RLIMIT_CORE",    "RLIMIT_RSS",
    "RLIMIT_NPROC",  "RLIMIT_NOFILE", "RLIMIT_MEMLOCK", "RLIMIT_AS",     "RLIMIT_LOCKS",   "RLIMIT_SIGPENDING",
    "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_RTPRIO", "RLIMIT_RTTIME"};
constexpr uint32_t kNumLimits = sizeof kLimitNames / sizeof kLimitNames[0];
static_assert(kNumLimits == RLIM_NLIMITS, "limit names out of date");

// prlimit64 via syscall: the raw 64-bit form, no libc translation of RLIM_INFINITY.
struct Rlim64 {
  uint64_t cur, max;
};
int get_limit(uint32_t res, Rlim64* out) { return static_cast<int>(syscall(SYS_prlimit64, 0, res, nullptr, out)); }
int set_limit(uint32_t res, const Rlim64* in) { return static_cast<int>(syscall(SYS_prlimit64, 0, res, in, nullptr)); }

int init() { return 0; }

constexpr uint32_t kMaxNames = 256;  // threads whose names are kept (the rest keep the restarter's)
constexpr size_t kComm = 16;         // TASK_COMM_LEN


// "/proc/self/task/<tid>/comm" (tid 0: the leader's, /proc/self/comm).
void comm_path(char* out, size_t cap, uint32_t tid) {
  Msg m(out, cap);
  if (tid == 0) m.s("/proc/self/comm");
  else m.s("/proc/self/task/").u(tid).s("/comm");
}

// Saves [u32 count] then per thread [u32 tid (0 for the main thread)][name].
void save_names(Out& out) {
  uint32_t tids[kMaxNames];
  uint32_t n = 0;
  int dir = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  alignas(8) char buf[2048];
  for (long got; dir >= 0 && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
    for (long off = 0; off < got;) {
      auto* d = reinterpret_cast<Dirent64*>(buf + off);
      off += d->reclen;
      uint32_t tid = 0;
      for (const char* s = d->name; *s >= '0' && *s <= '9'; ++s) tid = tid * 10 + uint32_t(*s - '0');
      if (tid != 0 && n < kMaxNames) tids[n++] = tid;
    }
  }
  if (dir >= 0) syscall(SYS_close, dir);
  const uint32_t me = static_cast<uint32_t>(syscall(SYS_getpid));
  out.u32(n);
  for (uint32_t k = 0; k < n; ++k) {
    char path[64], name[kComm + 1] = "";
    comm_path(path, sizeof path, tids[k]);
    int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
    long len = fd >= 0 ? syscall(SYS_read, fd, name, kComm) : 0;
    if (fd >= 0) syscall(SYS_close, fd);
    while (len > 0 && (name[len - 1] == '\n' || name[len - 1] == 0)) --len;
    out.u32(tids[k] == me ? 0 : tids[k]);
    out.str(name, len > 0 ? static_cast<size_t>(len) : 0);
  }
}

// Names each thread again; a thread that came back with another id keeps the restarter's name.
void restore_names(uint32_t n, const uint32_t* tids, char (*names)[kComm + 1]) {
  for (uint32_t k = 0; k < n; ++k) {
    char path[64];
    comm_path(path, sizeof path, tids[k]);
    int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC));
    if (fd < 0) continue;
    size_t len = 0;
    while (names[k][len]) ++len;
    syscall(SYS_write, fd, names[k], len);
    syscall(SYS_close, fd);
  }
}

int save(inject::SectionWriter& w) {
  Out out(w);
  out.tag(kTag);
  out.u32(kNumLimits);
  for (uint32_t r = 0; r < kNumLimits; ++r) {
    Rlim64 l{};
    if (get_limit(r, &l) != 0) return -errno;
    out.bytes(&l, sizeof l);
  }
  char cwd[PATH_MAX];
  long n = syscall(SYS_getcwd, cwd, sizeof cwd);  // raw: returns the length incl. the nul
  if (n <= 0) return n < 0 ? -errno : -ENOENT;
  out.str(cwd, static_cast<size_t>(n - 1));
  mode_t mask = umask(0);  // the only way to read it besides /proc; user threads are suspended
  umask(mask);
  out.u32(mask);
  save_names(out);
  return out.ok() ? 0 : -ENOMEM;
}

void resume(bool) {}

// Limits that cannot be restored (raising a hard limit needs CAP_SYS_RESOURCE) are lowered to what the
// new process may have, with a warning: the program keeps running, perhaps with less headroom.
void restore_limit(uint32_t r, const Rlim64& want) {
  if (set_limit(r, &want) == 0) return;
  int e = errno;
  Rlim64 now{};
  if (get_limit(r, &now) == 0) {
    Rlim64 best{want.cur < now.max ? want.cur : now.max, want.max < now.max ? want.max : now.max};
    set_limit(r, &best);
  }
  char line[200];
  Msg(line, sizeof line).s(kLimitNames[r]).s(": cannot restore soft ").u(want.cur).s(" hard ").u(want.max)
      .s(" (").err(e).s("); kept the restart process's hard limit");
  warn(line);
}

// mkdir -p (no allocation: restore context). Directories made get `mode` (less the current umask).
bool make_dirs(const char* path, mode_t mode) {
  char d[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof d) return false;
  memcpy(d, path, n + 1);
  for (char* p = d + 1;; ++p) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(d, mode) != 0 && errno != EEXIST) return false;
    if (c == '\0') return true;
    *p = '/';
  }
}

int restore(inject::SectionReader& r, char* msg, size_t cap) {
  char tmp[PATH_MAX + 80];
  In in(r);
  if (!in.tag(kTag)) return fail(msg, cap, Msg(tmp, sizeof tmp).s("proc section: bad tag (not a proc section)"), EINVAL);
  uint32_t n = in.u32();
  if (!in.ok() || n != kNumLimits)
    return fail(msg, cap, Msg(tmp, sizeof tmp).s("proc section: expected ").u(kNumLimits).s(" limits, got ").u(n), EINVAL);
  Rlim64 lim[kNumLimits];
  in.bytes(lim, sizeof lim);
  char cwd[PATH_MAX];
  in.str(cwd, sizeof cwd);
  uint32_t mask = in.u32();
  // Threads' names (section version 2).
  static uint32_t tids[kMaxNames];
  static char names[kMaxNames][kComm + 1];
  uint32_t nnames = in.u32();
  if (nnames > kMaxNames)
    return fail(msg, cap, Msg(tmp, sizeof tmp).s("proc section: ").u(nnames).s(" thread names (at most ").u(kMaxNames)
                .s(")"), EINVAL);
  for (uint32_t k = 0; k < nnames && in.ok(); ++k) {
    tids[k] = in.u32();
    in.str(names[k], sizeof names[k]);
  }
  if (!in.ok()) return fail(msg, cap, Msg(tmp, sizeof tmp).s("proc section: truncated"), EINVAL);
  if (in.remaining() != 0 || mask > 0777)
    return fail(msg, cap, Msg(tmp, sizeof tmp).s("proc section: malformed (trailing bytes or bad umask)"), EINVAL);
  for (uint32_t k = 0; k < kNumLimits; ++k) {
    if (lim[k].cur > lim[k].max)
      return fail(msg, cap, Msg(tmp, sizeof tmp).s("proc section: ").s(kLimitNames[k]).s(" soft above hard"), EINVAL);
  }
  if (chdir(cwd) != 0) {
    int e = errno;
    // A working directory under a node-local directory is missing on another host (a job run in /tmp/job):
    // made again, as the files plugin makes the directories of the node-local files it writes back.
    if (e == ENOENT && inject::node_local_path(cwd) && make_dirs(cwd, 0777 & ~mask) && chdir(cwd) == 0) {
      warn(Msg(tmp, sizeof tmp).s("working directory '").s(cwd).s("' was missing (node-local): made again").c_str());
    } else {
      return fail(msg, cap, Msg(tmp, sizeof tmp).s("working directory '").s(cwd).s("': ").err(e), e);
    }
  }
  for (uint32_t k = 0; k < kNumLimits; ++k) restore_limit(k, lim[k]);
  umask(static_cast<mode_t>(mask));
  restore_names(nnames, tids, names);
  return 0;
}

}  // namespace
}  // namespace revive::plugins

namespace revive::inject {
// Version 2: the threads' names follow the umask.
const Plugin kProcPlugin = {"proc", 2, plugins::init, plugins::save, plugins::resume, plugins::restore, nullptr, nullptr, nullptr, nullptr};
}
