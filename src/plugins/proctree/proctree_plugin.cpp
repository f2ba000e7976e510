// proctree plugin: saves this process's place in its process tree (pid, ppid, process group, session)
// and its exited-but-unreaped children with their wait status. The section is read by `revive restart`
// to recreate the tree with the same pids before the images are restored; restore here only checks it.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"
#include "plugins/proctree/proctree.h"
#include "plugins/proctree/proctree_record.h"

namespace revive::inject {
int coord_socket() __attribute__((weak));  // the engine's (src/inject/plugin.h); null without the engine
}

namespace revive::proctree {

volatile uint32_t g_forks_in_flight;

namespace {

long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) { return syscall(n, a, b, c, d, e); }

uint32_t parse_u32(const char* p, const char** end) {
  uint32_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + uint32_t(*p++ - '0');
  *end = p;
  return v;
}

// The state letter of /proc/PID/stat ('Z' for a zombie), or 0 when it cannot be read.
char proc_state(uint32_t pid) {
  char path[48];
  plugins::Msg(path, sizeof path).s("/proc/").u(pid).s("/stat");
  int fd = int(raw(SYS_openat, AT_FDCWD, long(path), O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  char buf[512];
  long n = raw(SYS_read, fd, long(buf), sizeof buf - 1);
  raw(SYS_close, fd);
  if (n <= 0) return 0;
  for (long i = n - 1; i > 0; --i)
    if (buf[i] == ')') return i + 2 < n ? buf[i + 2] : 0;
  return 0;
}

// waitpid's status word for a zombie, read without reaping it (WNOWAIT).
bool zombie_status(uint32_t pid, uint32_t* status) {
  siginfo_t si;
  si.si_pid = 0;
  if (raw(SYS_waitid, P_PID, pid, long(&si), WEXITED | WNOHANG | WNOWAIT, 0) != 0 || si.si_pid == 0) return false;
  if (si.si_code == CLD_EXITED) *status = uint32_t(si.si_status & 0xff) << 8;
  else if (si.si_code == CLD_KILLED) *status = uint32_t(si.si_status & 0x7f);
  else if (si.si_code == CLD_DUMPED) *status = uint32_t(si.si_status & 0x7f) | 0x80;
  else return false;
  return true;
}

// Children of every thread (/proc/self/task/T/children: a child belongs to the thread that forked it).
Zombie g_zombies[kMaxZombies];  // only the checkpoint thread touches it

uint32_t collect_zombies() {
  uint32_t nz = 0;
  int dfd = int(raw(SYS_openat, AT_FDCWD, long("/proc/self/task"), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0) return 0;
  char dents[4096], path[64], kids[4096];
  for (;;) {
    long got = raw(SYS_getdents64, dfd, long(dents), sizeof dents);
    if (got <= 0) break;
    for (long pos = 0; pos < got;) {
      auto* d = reinterpret_cast<struct dirent64*>(dents + pos);
      pos += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      plugins::Msg(path, sizeof path).s("/proc/self/task/").s(d->d_name).s("/children");
      int fd = int(raw(SYS_openat, AT_FDCWD, long(path), O_RDONLY | O_CLOEXEC));
      if (fd < 0) continue;
      long n = raw(SYS_read, fd, long(kids), sizeof kids - 1);
      raw(SYS_close, fd);
      if (n <= 0) continue;
      kids[n] = 0;
      for (const char* p = kids; *p;) {
        if (*p < '0' || *p > '9') {
          ++p;
          continue;
        }
        uint32_t pid = parse_u32(p, &p);
        uint32_t st = 0;
        if (proc_state(pid) == 'Z' && zombie_status(pid, &st) && nz < kMaxZombies) g_zombies[nz++] = {pid, st};
      }
    }
  }
  raw(SYS_close, dfd);
  return nz;
}

int init() {
  capture_env();
  adopt_exec_predecessor();
  return 0;
}

int save(inject::SectionWriter& w) {
  // Only a coordinated checkpoint has a computation to keep whole, and a client (`revive checkpoint`)
  // that retries a refused generation. Alone (interval or signal-triggered checkpoints, no coordinator)
  // a refusal would just lose the checkpoint: the image then records the forking thread waiting for a
  // child that a standalone restart does not bring back, and the wait ends at EOF like a dead child's.
  const bool coordinated = inject::coord_socket && inject::coord_socket() >= 0;
  if (coordinated && __atomic_load_n(&g_forks_in_flight, __ATOMIC_ACQUIRE) != 0) {
    // The child is not yet a process of the computation: this generation would lack it.
    plugins::warn("checkpoint refused: a fork() is in progress (its child has not joined the computation yet)");
    return -EAGAIN;
  }
  plugins::Out out(w);
  out.tag(kTag);
  out.u32(uint32_t(raw(SYS_getpid)));
  out.u32(uint32_t(raw(SYS_getppid)));
  out.u32(uint32_t(raw(SYS_getpgid, 0)));
  out.u32(uint32_t(raw(SYS_getsid, 0)));
  uint32_t nz = collect_zombies();
  out.u32(nz);
  for (uint32_t i = 0; i < nz; ++i) out.u32(g_zombies[i].pid) && out.u32(g_zombies[i].status);
  return out.ok() ? 0 : -ENOMEM;
}

// Nothing to rebuild here (the restart recreated the tree before this process came back); the section
// is only validated, so a damaged one is named instead of silently ignored.
int restore(inject::SectionReader& r, char* msg, size_t cap) {
  plugins::In in(r);
  char t[64];
  if (!in.tag(kTag)) return plugins::fail(msg, cap, plugins::Msg(t, sizeof t).s("proctree section: bad tag"), EINVAL);
  for (int i = 0; i < 4; ++i) in.u32();
  uint32_t nz = in.u32();
  if (!in.ok() || nz > kMaxZombies || in.remaining() != size_t(nz) * 8)
    return plugins::fail(msg, cap, plugins::Msg(t, sizeof t).s("proctree section: truncated or malformed"), EINVAL);
  return 0;
}

}  // namespace
}  // namespace revive::proctree

namespace revive::inject {
extern const Plugin kProcTreePlugin = {.name = "proctree",
                                       .version = proctree::kVersion,
                                       .init = proctree::init,
                                       .save = proctree::save,
                                       .resume = nullptr,
                                       .restore = proctree::restore,
                                       .drain = nullptr,
                                       .reconnect = nullptr,
                                       .refill = nullptr};
}  // namespace revive::inject
