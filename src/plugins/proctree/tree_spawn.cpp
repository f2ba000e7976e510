// Recreating a process tree with its pids: clone3(set_tid) needs CAP_SYS_ADMIN over the pid namespace
// (root here) and a free pid. Each process is created by the process that was its parent, so getppid(),
// waitpid() and process groups come out as recorded; zombies are children that exit at once with their
// recorded status and wait to be reaped by the restored parent.
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

// fork() with a chosen pid (0: any). Returns like fork; -errno on failure.
long fork_with_pid(uint32_t pid, bool exact) {
  if (!exact || pid == 0) {
    pid_t r = fork();
    return r < 0 ? -errno : r;
  }
  pid_t want = pid_t(pid);
  struct clone_args a;
  memset(&a, 0, sizeof a);
  a.exit_signal = SIGCHLD;
  a.set_tid = reinterpret_cast<uint64_t>(&want);
  a.set_tid_size = 1;
  long r = syscall(SYS_clone3, &a, sizeof a);
  return r < 0 ? -errno : r;
}

[[noreturn]] void die(const char* what, uint32_t pid, const TreeProc& t, int err) {
  const char* why = err == EEXIST  ? "the pid is taken"
                    : err == EPERM ? "recreating pids needs CAP_SYS_ADMIN (run revive restart as root)"
                                   : strerror(err);
  fprintf(stderr, "revive restart: cannot recreate %s pid %u of %s: %s\n", what, pid, t.image.c_str(), why);
  _exit(2);
}

[[noreturn]] void be_zombie(uint32_t status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, nullptr);
    kill(getpid(), sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

// Process group and session as recorded. A root only makes itself a leader when it was one (its
// original group/session lay outside the computation); a child joins what differs from its parent's.
void regroup(const TreePlan& plan, const TreeProc& t) {
  const TreeProc* p = t.parent >= 0 ? &plan.procs[size_t(t.parent)] : nullptr;
  if (t.sid == t.pid) {
    if (setsid() < 0) fprintf(stderr, "revive restart: pid %u: setsid: %s\n", t.pid, strerror(errno));
    return;
  }
  if (p && t.sid != p->sid)
    fprintf(stderr, "revive restart: pid %u: its session %u is not its parent's and it did not lead it; "
                    "keeping its parent's\n", t.pid, t.sid);
  if (t.pgid == t.pid) {
    if (setpgid(0, 0) < 0) fprintf(stderr, "revive restart: pid %u: setpgid: %s\n", t.pid, strerror(errno));
  } else if (p && t.pgid != p->pgid && setpgid(0, pid_t(t.pgid)) < 0) {
    fprintf(stderr, "revive restart: pid %u: cannot join process group %u: %s\n", t.pid, t.pgid, strerror(errno));
  }
}

[[noreturn]] void become(const TreePlan& plan, size_t i, bool exact, const std::function<void(size_t)>& exec_image) {
  const TreeProc& t = plan.procs[i];
  regroup(plan, t);
  for (const Zombie& z : t.zombies) {
    long r = fork_with_pid(z.pid, exact);
    if (r == 0) be_zombie(z.status);
    if (r < 0) die("exited child", z.pid, t, int(-r));
  }
  for (int c : t.children) {
    long r = fork_with_pid(plan.procs[size_t(c)].pid, exact);
    if (r == 0) become(plan, size_t(c), exact, exec_image);
    if (r < 0) die("child", plan.procs[size_t(c)].pid, t, int(-r));
  }
  exec_image(i);
  _exit(127);
}

}  // namespace

Status SpawnTree(const TreePlan& plan, bool exact_pids, const std::function<void(size_t)>& exec_image,
                 std::vector<pid_t>* roots_out) {
  for (int r : plan.roots) {
    const TreeProc& t = plan.procs[size_t(r)];
    long pid = fork_with_pid(t.pid, exact_pids);
    if (pid == 0) become(plan, size_t(r), exact_pids, exec_image);
    if (pid < 0) {
      int e = int(-pid);
      return Status::IOError("cannot recreate pid " + std::to_string(t.pid) + " of " + t.image + ": " +
                             (e == EEXIST  ? "the pid is taken"
                              : e == EPERM ? "recreating pids needs CAP_SYS_ADMIN (run revive restart as root)"
                                           : strerror(e)));
    }
    roots_out->push_back(pid_t(pid));
  }
  return Status::OK();
}

}  // namespace revive::proctree
