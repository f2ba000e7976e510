// Recorded pids without privilege: a new pid namespace in which they are all free, entered through a new
// user namespace when the caller is an ordinary user (its uid and gid mapped to themselves, so files and
// getuid() look as before). This is the fast path of docs/process-trees.md ("Restart as an ordinary
// user"); where user namespaces are disabled revive restart falls back to new pids (virtual ids).
//
// Processes: `revive restart` (the caller) forks A; A unshares user + pid + mount namespaces, writes its
// id maps and forks B, pid 1 of the new pid namespace. B mounts a /proc of its namespace (paths like
// /proc/<pid> the restored programs open must name their own processes), runs the restart body (spawning
// the tree with clone3 set_tid, which the namespace's owner may do) and reports its exit code to the
// caller through a pipe; then B stays to reap every process of the namespace (orphans come to pid 1, and
// its exit would kill whatever is left). The caller returns as soon as the code arrives, as a plain
// restart returns when its roots exit.
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

// What A and B tell the caller: 'E' errno (namespace setup failed: nothing was restored, fall back),
// 'C' code (the restart body finished with this exit code).
struct NsMsg {
  char kind;
  int32_t val;
  char what[64];
};

void send(int fd, char kind, int32_t val, const char* what) {
  NsMsg m;
  memset(&m, 0, sizeof m);
  m.kind = kind;
  m.val = val;
  snprintf(m.what, sizeof m.what, "%s", what);
  while (write(fd, &m, sizeof m) < 0 && errno == EINTR) {
  }
}

bool write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == ssize_t(strlen(text));
}

// Keeps CAP_CHECKPOINT_RESTORE (of the new user namespace) across revive-restart's exec as an ordinary
// user: it recreates thread ids with clone3 set_tid and sets /proc/self/exe back (PR_SET_MM_MAP exe_fd).
// The restored engine drops it again in every thread (REVIVE_DROP_CAPS), so the program runs with the
// capabilities it had: none.
bool keep_restore_cap_over_exec() {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0) return false;
  d[CAP_CHECKPOINT_RESTORE / 32].inheritable |= 1u << (CAP_CHECKPOINT_RESTORE % 32);
  if (syscall(SYS_capset, &h, d) != 0) return false;
  return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHECKPOINT_RESTORE, 0, 0) == 0;
}

[[noreturn]] void be_init(int report, bool userns, const std::function<int()>& body) {
  // Our own /proc: the outer one shows the outer namespace's pids.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    send(report, 'E', errno, "making the mount namespace private");
    _exit(1);
  }
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    send(report, 'E', errno, "mounting /proc of the new pid namespace");
    _exit(1);
  }
  if (userns) {
    if (!keep_restore_cap_over_exec())
      fprintf(stderr, "revive restart: warning: cannot keep CAP_CHECKPOINT_RESTORE for revive-restart (%s); "
                      "threads come back with new tids\n", strerror(errno));
    setenv("REVIVE_DROP_CAPS", "1", 1);
  }
  SetStandInParents(true);
  int code = body();
  send(report, 'C', code, "");
  close(report);
  // Pid 1: every orphan of the namespace is ours to reap; leaving would SIGKILL the rest.
  for (;;) {
    pid_t p = waitpid(-1, nullptr, __WALL);
    if (p < 0 && errno == ECHILD) break;
  }
  _exit(code & 0xff);
}

}  // namespace

bool HasPidPrivilege() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return false;
  char line[256];
  unsigned long long eff = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "CapEff:", 7) == 0) eff = strtoull(line + 7, nullptr, 16);
  fclose(f);
  return (eff >> CAP_SYS_ADMIN & 1) || (eff >> CAP_CHECKPOINT_RESTORE & 1);
}

namespace {
bool g_new_ipc_ns = false;
}  // namespace

void SetIpcNamespace(bool on) { g_new_ipc_ns = on; }

Status RunInPidNamespace(const std::function<int()>& body, int* code, void (*on_interrupt)()) {
  const bool userns = !HasPidPrivilege();
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  fflush(nullptr);
  pid_t a = fork();
  if (a < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return Status::FromErrno("fork", e);
  }
  if (a == 0) {
    close(p[0]);
    // SysV segments: their ids can only be chosen (shm_next_id) with CAP_SYS_ADMIN over the IPC namespace,
    // which we have in one of our own; and there the recorded keys are free (a restart beside another).
    int flags = CLONE_NEWPID | CLONE_NEWNS | (userns ? CLONE_NEWUSER : 0) | (g_new_ipc_ns ? CLONE_NEWIPC : 0);
    if (unshare(flags) != 0) {
      send(p[1], 'E', errno, userns ? "unshare(user, pid, mount namespaces)" : "unshare(pid, mount namespaces)");
      _exit(1);
    }
    if (userns) {
      char map[64];
      snprintf(map, sizeof map, "%u %u 1\n", unsigned(uid), unsigned(uid));
      bool ok = write_file("/proc/self/setgroups", "deny") && write_file("/proc/self/uid_map", map);
      snprintf(map, sizeof map, "%u %u 1\n", unsigned(gid), unsigned(gid));
      if (!ok || !write_file("/proc/self/gid_map", map)) {
        send(p[1], 'E', errno, "writing the user namespace's id maps");
        _exit(1);
      }
    }
    pid_t b = fork();
    if (b < 0) {
      send(p[1], 'E', errno, "fork into the new pid namespace");
      _exit(1);
    }
    if (b == 0) be_init(p[1], userns, body);
    close(p[1]);
    int st = 0;
    while (waitpid(b, &st, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  close(p[1]);
  NsMsg m;
  ssize_t n;
  for (;;) {
    // on_interrupt is also called every 100 ms: a signal just before a blocking read would not cut it.
    if (on_interrupt) {
      on_interrupt();
      struct pollfd pf = {p[0], POLLIN, 0};
      if (poll(&pf, 1, 100) == 0) continue;
    }
    n = read(p[0], &m, sizeof m);
    if (n >= 0 || errno != EINTR) break;
  }
  close(p[0]);
  if (n == ssize_t(sizeof m) && m.kind == 'C') {
    *code = m.val;
    return Status::OK();  // A (and B) live on until the namespace is empty; init reaps A then
  }
  int st = 0;
  while (waitpid(a, &st, 0) < 0 && errno == EINTR) {
  }
  if (n == ssize_t(sizeof m) && m.kind == 'E') {
    m.what[sizeof m.what - 1] = 0;
    return Status::FromErrno(m.what, m.val);
  }
  // B died without a word (killed from outside): its tree died with it.
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (*code == 0) *code = 1;
  fprintf(stderr, "revive restart: the restart's pid namespace ended before its processes finished (status %d)\n",
          *code);
  return Status::OK();
}

}  // namespace revive::proctree
