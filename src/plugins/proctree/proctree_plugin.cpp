// proctree plugin: saves this process's place in its process tree (pid, ppid, process group, session)
// and its exited-but-unreaped children with their wait status. The section is read by `revive restart`
// to recreate the tree with the same pids before the images are restored; restore here only checks it.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"
#include "plugins/proctree/engine_hooks.h"
#include "plugins/proctree/proctree.h"
#include "plugins/proctree/proctree_record.h"
#include "plugins/vpid/vpid.h"

namespace revive::inject {
int coord_socket() __attribute__((weak));  // the engine's (src/inject/plugin.h); null without the engine
}

namespace revive::proctree {

char joined_byte() {
  return inject::coord_joined_outside && !inject::coord_joined_outside() ? '1' : '0';
}

namespace {

long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) { return syscall(n, a, b, c, d, e); }

uint32_t parse_u32(const char* p, const char** end) {
  uint32_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + uint32_t(*p++ - '0');
  *end = p;
  return v;
}

// The state letter of /proc/PID/stat ('Z' for a zombie), or 0 when it cannot be read; *exiting: the
// kernel's PF_EXITING flag (in exit, not yet a zombie).
char proc_state(uint32_t pid, bool* exiting = nullptr) {
  char path[48];
  plugins::Msg(path, sizeof path).s("/proc/").u(pid).s("/stat");
  int fd = int(raw(SYS_openat, AT_FDCWD, long(path), O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  char buf[512];
  long n = raw(SYS_read, fd, long(buf), sizeof buf - 1);
  raw(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  for (long i = n - 1; i > 0; --i) {
    if (buf[i] != ')') continue;
    if (i + 2 >= n) return 0;
    if (exiting) {  // fields after the state: ppid pgrp session tty_nr tpgid flags
      const char* p = buf + i + 3;
      for (int f = 0; f < 5 && *p; ++f) {
        while (*p && *p != ' ') ++p;
        while (*p == ' ') ++p;
      }
      const char* e;
      *exiting = (parse_u32(p, &e) & 0x4u) != 0;  // PF_EXITING
    }
    return buf[i + 2];
  }
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

// Calls fn(pid) for each child of every thread (/proc/self/task/T/children: a child belongs to the
// thread that forked it) until fn returns false. No allocation: runs in the checkpoint.
template <typename Fn>
void for_each_child(Fn fn) {
  int dfd = int(raw(SYS_openat, AT_FDCWD, long("/proc/self/task"), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd < 0) return;
  char dents[4096], path[64], kids[4096];
  bool more = true;
  while (more) {
    long got = raw(SYS_getdents64, dfd, long(dents), sizeof dents);
    if (got <= 0) break;
    for (long pos = 0; pos < got && more;) {
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
      for (const char* p = kids; *p && more;) {
        if (*p < '0' || *p > '9') {
          ++p;
          continue;
        }
        more = fn(parse_u32(p, &p));
      }
    }
  }
  raw(SYS_close, dfd);
}

Zombie g_zombies[kMaxZombies];  // only the checkpoint thread touches it

uint32_t collect_zombies() {
  uint32_t nz = 0;
  for_each_child([&nz](uint32_t pid) {
    uint32_t st = 0;
    // A child in the middle of its exit (it left the computation during the suspend phase, its socket
    // closed before it became a zombie): wait for the zombie, up to 200 ms.
    bool exiting = false;
    char state = proc_state(pid, &exiting);
    for (int i = 0; state != 'Z' && exiting && i < 200; ++i) {
      struct timespec ms = {0, 1000000};
      raw(SYS_nanosleep, long(&ms), 0);
      state = proc_state(pid, &exiting);
    }
    if (state == 'Z' && zombie_status(pid, &st) && nz < kMaxZombies) g_zombies[nz++] = {pid, st};
    return true;
  });
  return nz;
}

// The first child of any thread (running or exited but unreaped), or 0. The engine's forked image
// writer is not the program's.
uint32_t first_child() {
  const long writer = inject::checkpoint_writer_pid ? inject::checkpoint_writer_pid() : 0;
  uint32_t found = 0;
  for_each_child([&](uint32_t pid) {
    if (long(pid) != writer) found = pid;
    return found == 0;
  });
  return found;
}

uint64_t mono_ms() {
  struct timespec ts;
  raw(SYS_clock_gettime, CLOCK_MONOTONIC, long(&ts));
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// Standalone (no coordinator): `revive-restart IMAGE` brings back this process alone, so a child it has
// (running, or exited and not yet waited for: a program between its fork() and its waitpid()) would be
// missing and its wait would fail with ECHILD. The checkpoint is deferred (the engine tries again every
// 20 ms) for up to 2 s; a child that lives longer is a process tree, which `revive launch` keeps whole:
// then the checkpoint is taken with a warning naming the child.
constexpr uint64_t kDeferMs = 2000;
uint64_t g_defer_since;

int init() {
  vpid::init();  // first: an exec'ed image of a restored process sees its ids from the start
  pending_init();
  capture_env();
  adopt_exec_predecessor();
  return 0;
}

// Phase drain, before the chan plugin's (it would take the children's bytes out of the sync sockets):
// whether every fork in flight has a child in this generation. Every thread is parked by now, so no new
// fork starts before save() uses the answer.
bool g_children_in = true, g_drained = false;

int drain(uint64_t, char*, size_t) {
  // The suspend phase poked our lazily joining children and waited for them (children_join_now).
  g_children_in = children_joined_at_suspend() && inflight_all_joined();
  g_drained = true;
  return 0;
}

int save(inject::SectionWriter& w) {
  // Only a coordinated checkpoint has a computation to keep whole, and a coordinator that retries a
  // refused generation (server_barrier.cpp). Alone (interval or signal-triggered checkpoints, no coordinator)
  // a refusal would just lose the checkpoint: the image then records the forking thread waiting for a
  // child that a standalone restart does not bring back, and the wait ends at EOF like a dead child's.
  const bool coordinated = inject::coord_socket && inject::coord_socket() >= 0;
  if (!coordinated) {
    drop_join_timer();  // a coordinated checkpoint dropped it in its suspend phase
    if (uint32_t child = first_child()) {
      const uint64_t now = mono_ms();
      if (g_defer_since == 0) g_defer_since = now;
      if (now - g_defer_since < kDeferMs) return -EAGAIN;
      char line[200];
      plugins::warn(plugins::Msg(line, sizeof line).s("checkpoint taken while child pid ").u(child)
                        .s(" exists: a restart of this image alone does not bring it back (launch process trees "
                           "with `revive launch`)").c_str());
    }
    g_defer_since = 0;
  }
  const bool children_in = g_drained ? g_children_in : inflight_all_joined();
  g_drained = false;
  if (coordinated && !children_in) {
    // The child is not yet a process of the computation: this generation would lack it. -EAGAIN makes
    // the coordinator take the generation again a moment later (no warning: nothing is lost).
    return -EAGAIN;
  }
  plugins::Out out(w);
  out.tag(kTag);
  // The ids the program sees (virtual after a restart without pid recreation: the next restart must
  // give it the same ones again); the kernel's otherwise.
  out.u32(uint32_t(vpid::active() ? vpid::g_vpid : pid_t(raw(SYS_getpid))));
  out.u32(uint32_t(vpid::to_virt(pid_t(raw(SYS_getppid)))));
  out.u32(uint32_t(vpid::to_virt(pid_t(raw(SYS_getpgid, 0)))));
  out.u32(uint32_t(vpid::to_virt(pid_t(raw(SYS_getsid, 0)))));
  uint32_t nz = collect_zombies();
  out.u32(nz);
  for (uint32_t i = 0; i < nz; ++i) out.u32(uint32_t(vpid::to_virt(pid_t(g_zombies[i].pid)))) && out.u32(g_zombies[i].status);
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
                                       .drain = proctree::drain,
                                       .reconnect = nullptr,
                                       .refill = nullptr,
                                       .restored = nullptr};
}  // namespace revive::inject
