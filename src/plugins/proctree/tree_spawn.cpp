// Recreating a process tree with its pids: clone3(set_tid) needs CAP_SYS_ADMIN over the pid namespace
// (root here) and a free pid. Each process is created by the process that was its parent, so getppid(),
// waitpid() and process groups come out as recorded; zombies are children that exit at once with their
// recorded status and wait to be reaped by the restored parent.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "plugins/common/same_open.h"

#include "plugins/fd/timerfd_make.h"
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

// Every process of the tree reports on `ready` (its pid, and whether it made all its children) and then
// waits for EOF on `go` before it execs its restorer: nothing is restored unless the whole tree exists,
// so a failure part-way never leaves restored processes waiting for a peer that will not come.
struct Sync {
  int ready[2] = {-1, -1};
  int go[2] = {-1, -1};
};
Sync g_sync;
vpid::Table* g_vtab;  // virtual pids: the shared table every process of the skeleton registers in

// (recorded pid -> kernel pid) of a process or zombie just made; false when the table is full.
bool register_vpid(uint32_t recorded, pid_t real) {
  if (!g_vtab) return true;
  g_vtab->remove_virt(recorded);  // not there: every recorded pid is registered once
  return g_vtab->insert(recorded, uint32_t(real));
}

struct Report {
  uint32_t pid;
  uint32_t ok;
  int32_t err;     // why it failed (errno), 0 if ok
  uint32_t index;  // the reporting process's plan index (when ok)
};

void report(uint32_t pid, bool ok, int err = 0, uint32_t index = 0) {
  Report r = {pid, ok ? 1u : 0u, err, index};
  while (write(g_sync.ready[1], &r, sizeof r) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void die(const char* what, uint32_t pid, const TreeProc& t, int err) {
  const char* why = err == EEXIST   ? "the pid is taken"
                    : err == EPERM  ? "recreating pids needs CAP_SYS_ADMIN (run revive restart as root)"
                    : err == ENOSPC ? "the virtual-pid table is full"
                                    : strerror(err);
  fprintf(stderr, "revive restart: cannot recreate %s pid %u of %s: %s\n", what, pid, t.image.c_str(), why);
  report(uint32_t(getpid()), false, err);
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

// The kernel's id now of a recorded process group (its leader's new pid with virtual pids).
pid_t group_now(uint32_t pgid) {
  uint32_t r = g_vtab ? g_vtab->real_of(pgid) : 0;
  return pid_t(r ? r : pgid);
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
  } else if (p && t.pgid != p->pgid && setpgid(0, group_now(t.pgid)) < 0) {
    fprintf(stderr, "revive restart: pid %u: cannot join process group %u: %s\n", t.pid, t.pgid, strerror(errno));
  }
}

// Shared open file descriptions (plan.shared[g]) live at descriptor g_share_base + g, above every
// descriptor any image restores and every one `revive restart` holds, so nothing restored lands on them.
// The owner opens each before it forks; children inherit it; each process tells its restorer which of
// its fds it is (REVIVE_FD_SHARED, read by revive-restart and handed to the fd plugin) and closes the rest.
// Above them, at deleted_slot(d), the deleted files held by several processes (plan.deleted[d]), made by
// `revive restart` and inherited by every process, which opens their descriptions through them.
int g_share_base = -1;

int deleted_slot(const TreePlan& plan, size_t d) { return g_share_base + int(plan.shared.size() + d); }

// Every shared description's and deleted file's descriptor of ours closed.
void close_share_slots(const TreePlan& plan) {
  if (g_share_base < 0) return;
  for (size_t g = 0; g < plan.shared.size() + plan.deleted.size(); ++g) close(g_share_base + int(g));
}

// A shared description that some process held as its fd 0/1/2, of the file that is ours (`revive
// restart`'s) at that number, opened the same way: ours again (a dup), so the tree and whoever started the
// restart (`revive run ... >job.log 2>&1`) keep one offset, as at launch (the fd plugin's restart_stdio
// does the same for a description one process holds). -1 otherwise.
int restart_stdio(const SharedFile& f) {
  for (const auto& [proc, num] : f.members)
    if (num >= 0 && num <= 2 && plugins::same_open_file(num, f.path.c_str(), f.flags))
      return fcntl(num, F_DUPFD, 0);  // inherited by the children, as open() without O_CLOEXEC
  return -1;
}

// One timerfd for every holder, armed as saved (the fd plugin's procedure, timerfd_make.h). -1 (said) when
// it cannot be made: each holder's fd plugin then makes one of its own, as before.
int make_timerfd(const SharedFile& f) {
  const plugins::TimerfdState& s = f.tfd;
  plugins::TimerfdMade why;
  bool ticks_lost;
  const int fd = plugins::timerfd_from_state(s, f.flags & O_NONBLOCK ? TFD_NONBLOCK : 0, &why, &ticks_lost);
  if (why == plugins::TimerfdMade::kMalformed)
    fprintf(stderr, "revive restart: a shared timerfd's saved state is malformed: each holder gets its own\n");
  else if (why == plugins::TimerfdMade::kNoClock)
    fprintf(stderr, "revive restart: cannot make a shared timerfd (clock %d): %s\n", s.clockid, strerror(errno));
  else if (why == plugins::TimerfdMade::kNotArmed)
    fprintf(stderr, "revive restart: cannot arm a shared timerfd: %s\n", strerror(errno));
  else if (ticks_lost)
    fprintf(stderr, "revive restart: a shared timerfd's %llu unread expirations are lost (kernel without "
            "TFD_IOC_SET_TICKS)\n", (unsigned long long)s.ticks);
  return fd;
}

void open_shared(const TreePlan& plan, int owner) {
  if (g_share_base < 0) return;
  for (size_t g = 0; g < plan.shared.size(); ++g) {
    const SharedFile& f = plan.shared[g];
    if (f.owner != owner) continue;
    // Not O_TRUNC: contents are the files plugin's and the size policy the fd plugin's. O_CREAT for a
    // file open for writing: the files plugin writes its saved contents back into this same inode (a
    // temporary file deleted after the checkpoint). A file that cannot be opened is left to the fd
    // plugin (it reopens by path and names the problem).
    int create = (f.flags & O_ACCMODE) != O_RDONLY && f.deleted < 0 ? O_CREAT : 0;
    // A deleted file's description: a new one of the inode recreated at its slot (MakeDeletedFiles).
    const std::string path =
        f.deleted < 0 ? f.path : "/proc/self/fd/" + std::to_string(deleted_slot(plan, size_t(f.deleted)));
    int fd = f.deleted < 0 && !f.eventfd && !f.timerfd && !f.signalfd && !f.epoll && !f.inotify ? restart_stdio(f) : -1;
    if (f.eventfd) {
      // One eventfd for every holder, with the saved counter (a write: it may exceed eventfd()'s unsigned
      // int initial value). Inherited like the files below; each process's fd plugin takes it.
      fd = eventfd(0, (f.flags & O_NONBLOCK ? EFD_NONBLOCK : 0) | (f.efd_semaphore ? EFD_SEMAPHORE : 0));
      if (fd >= 0 && f.efd_count > 0 && write(fd, &f.efd_count, sizeof f.efd_count) != sizeof f.efd_count) {
        fprintf(stderr, "revive restart: cannot set a shared eventfd's counter: %s\n", strerror(errno));
        close(fd);
        fd = -1;
      }
    } else if (f.timerfd) {
      fd = make_timerfd(f);
    } else if (f.signalfd) {
      // One signalfd for every holder, with the saved mask (the kernel's 8-byte set, as the fd plugin's
      // restore_signalfd makes one). Each process reads its own pending signals through it, as before.
      fd = int(syscall(SYS_signalfd4, -1, &f.sfd_mask, 8, f.flags & O_NONBLOCK ? SFD_NONBLOCK : 0));
      if (fd < 0) fprintf(stderr, "revive restart: cannot make a shared signalfd: %s\n", strerror(errno));
    } else if (f.epoll) {
      // One epoll instance for every holder, empty: each holder's fd plugin registers the targets it holds.
      fd = epoll_create1(0);
      if (fd < 0) fprintf(stderr, "revive restart: cannot make a shared epoll instance: %s\n", strerror(errno));
    } else if (f.inotify) {
      // One inotify instance for every holder, empty: the holder its share key names adds the watches.
      fd = inotify_init1(f.flags & O_NONBLOCK ? IN_NONBLOCK : 0);
      if (fd < 0) fprintf(stderr, "revive restart: cannot make a shared inotify instance: %s\n", strerror(errno));
    } else if (fd < 0) {
      fd = open(path.c_str(), (f.flags & ~O_CLOEXEC) | O_NOCTTY | create, 0600);
    }
    if (fd < 0) continue;
    if (fd != g_share_base + int(g)) {
      if (dup3(fd, g_share_base + int(g), 0) < 0)
        fprintf(stderr, "revive restart: cannot share %s between processes: %s\n", f.path.c_str(), strerror(errno));
      close(fd);
    }
  }
}

// Before exec: REVIVE_FD_SHARED for process i's own members, and no other shared descriptor left open.
void hand_shared(const TreePlan& plan, size_t i) {
  if (g_share_base < 0) return;
  std::string env;
  for (size_t g = 0; g < plan.shared.size(); ++g) {
    const int inh = g_share_base + int(g);
    bool used = false;
    for (const auto& [proc, fd] : plan.shared[g].members)
      if (proc == int(i) && fcntl(inh, F_GETFD) >= 0) {
        env += (env.empty() ? "" : ",") + std::to_string(fd) + ":" + std::to_string(inh);
        used = true;
      }
    if (!used) close(inh);
  }
  for (size_t d = 0; d < plan.deleted.size(); ++d) close(deleted_slot(plan, d));  // its descriptions are open
  if (env.empty()) unsetenv("REVIVE_FD_SHARED");
  else setenv("REVIVE_FD_SHARED", env.c_str(), 1);
}

// The lowest descriptor above every saved one and every one open here, or -1 (no room under the limit).
int share_base(const TreePlan& plan) {
  if (plan.shared.empty()) return -1;  // (every deleted file of plan.deleted has a description there)
  int top = 2;
  for (const TreeProc& t : plan.procs) top = std::max(top, int(t.max_fd));
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) top = std::max(top, atoi(e->d_name));
    closedir(d);
  }
  struct rlimit rl;
  const size_t slots = plan.shared.size() + plan.deleted.size();
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rlim_t(top) + 1 + slots > rl.rlim_cur) {
    fprintf(stderr, "revive restart: warning: no descriptor numbers left under RLIMIT_NOFILE (%llu) for %zu "
                    "shared file(s); each process gets its own offset\n",
            (unsigned long long)rl.rlim_cur, plan.shared.size());
    return -1;
  }
  return top + 1;
}

// Where the shared memory objects' descriptors go: above the shared descriptions' (which a process dup3s
// into place after the objects exist) and every descriptor an image restores.
int shm_floor(const TreePlan& plan) {
  int top = g_share_base >= 0 ? g_share_base + int(plan.shared.size() + plan.deleted.size()) : 3;
  for (const TreeProc& t : plan.procs) top = std::max(top, int(t.max_fd) + 1);
  return top;
}

[[noreturn]] void become(const TreePlan& plan, size_t i, bool exact, const std::function<void(size_t)>& exec_image) {
  const TreeProc& t = plan.procs[i];
  close(g_sync.ready[0]);
  close(g_sync.go[1]);
  if (!register_vpid(t.pid, getpid())) die("", t.pid, t, ENOSPC);
  regroup(plan, t);
  open_shared(plan, int(i));  // before its children: they inherit the descriptions
  for (const Zombie& z : t.zombies) {
    long r = fork_with_pid(z.pid, exact);
    if (r == 0) be_zombie(z.status);
    if (r < 0) die("exited child", z.pid, t, int(-r));
    if (!register_vpid(z.pid, pid_t(r))) die("exited child", z.pid, t, ENOSPC);
  }
  for (int c : t.children) {
    long r = fork_with_pid(plan.procs[size_t(c)].pid, exact);
    if (r == 0) become(plan, size_t(c), exact, exec_image);
    if (r < 0) die("child", plan.procs[size_t(c)].pid, t, int(-r));
  }
  report(uint32_t(getpid()), true, 0, uint32_t(i));
  close(g_sync.ready[1]);
  char c;
  while (read(g_sync.go[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(g_sync.go[0]);
  hand_shared(plan, i);
  HandShm(plan, i);
  exec_image(i);
  _exit(127);
}

// A root's parent was outside the computation (revive launch, a shell); it is gone, but the root may
// have kept getppid()'s value. As pid 1 of our own pid namespace (tree_ns.cpp) every pid is ours, so a
// stand-in parent takes the recorded ppid: it makes the root and passes its end on as its own (exit
// status, or the same signal), so `revive restart` still reports the root's status.
bool g_stand_in_parents = false;

long fork_root(const TreePlan& plan, int r, bool exact, const std::function<void(size_t)>& exec_image) {
  const TreeProc& t = plan.procs[size_t(r)];
  if (!exact || !g_stand_in_parents || t.ppid <= 1 || t.ppid == t.pid) return fork_with_pid(t.pid, exact);
  long sp = fork_with_pid(t.ppid, true);
  if (sp != 0) return sp < 0 ? fork_with_pid(t.pid, exact) : sp;  // pid taken (cannot be): no stand-in
  long pid = fork_with_pid(t.pid, exact);
  if (pid == 0) become(plan, size_t(r), exact, exec_image);
  if (pid < 0) {
    fprintf(stderr, "revive restart: cannot recreate pid %u of %s: %s\n", t.pid, t.image.c_str(),
            strerror(int(-pid)));
    report(uint32_t(getpid()), false, int(-pid));
    _exit(2);
  }
  // Nothing of the tree's plumbing is the stand-in's: EOF on `ready` must mean the tree died.
  for (int fd : {g_sync.ready[0], g_sync.ready[1], g_sync.go[0], g_sync.go[1]}) close(fd);
  close_share_slots(plan);
  CloseShm(true);
  int st = 0;
  while (waitpid(pid_t(pid), &st, 0) < 0 && errno == EINTR) {
  }
  be_zombie(uint32_t(st));
}

}  // namespace

void SetStandInParents(bool on) { g_stand_in_parents = on; }

Status SpawnTree(const TreePlan& plan, bool exact_pids, const std::function<void(size_t)>& exec_image,
                 std::vector<pid_t>* roots_out, vpid::Table* table, std::vector<TreeMember>* below) {
  g_vtab = exact_pids ? nullptr : table;
  if (pipe2(g_sync.ready, O_CLOEXEC) != 0 || pipe2(g_sync.go, O_CLOEXEC) != 0)
    return Status::FromErrno("pipe", errno);
  g_share_base = share_base(plan);
  // Shared memory objects first: a deleted file one process maps and another only holds is that object.
  Status s = MakeShmObjects(plan, shm_floor(plan));
  if (s.ok() && g_share_base >= 0) s = MakeDeletedFiles(plan, deleted_slot(plan, 0));
  if (s.ok()) open_shared(plan, -1);  // descriptions shared across roots: ours, inherited by each root
  if (!s.ok()) {
    CloseShm(true);
    for (int fd : {g_sync.ready[0], g_sync.ready[1], g_sync.go[0], g_sync.go[1]}) close(fd);
    close_share_slots(plan);
    return s;
  }
  for (int r : plan.roots) {
    const TreeProc& t = plan.procs[size_t(r)];
    long pid = fork_root(plan, r, exact_pids, exec_image);
    if (pid == 0) become(plan, size_t(r), exact_pids, exec_image);
    if (pid < 0) {
      int e = int(-pid);
      std::string msg = "cannot recreate pid " + std::to_string(t.pid) + " of " + t.image + ": " +
                        (e == EEXIST  ? "the pid is taken"
                         : e == EPERM ? "recreating pids needs CAP_SYS_ADMIN (run revive restart as root)"
                                      : strerror(e));
      s = e == EEXIST ? Status::AlreadyExists(msg) : Status::IOError(msg);
      break;
    }
    roots_out->push_back(pid_t(pid));
  }
  close(g_sync.ready[1]);
  close(g_sync.go[0]);
  close_share_slots(plan);
  CloseShm(false);
  // Until every process of the plan reported success, or one failed, or all are gone (EOF).
  std::vector<pid_t> made;
  bool failed = !s.ok();
  for (size_t k = 0; !failed && k < plan.procs.size();) {
    Report r;
    ssize_t n = read(g_sync.ready[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof r) {
      failed = true;
      if (s.ok()) s = Status::IOError("a process of the tree died before it was complete");
      break;
    }
    if (!r.ok) {
      failed = true;
      std::string msg = "pid " + std::to_string(r.pid) + " could not recreate its children (see above)";
      s = r.err == EEXIST ? Status::AlreadyExists(msg) : Status::IOError(msg);
      break;
    }
    made.push_back(pid_t(r.pid));
    if (below && r.index < plan.procs.size() &&
        std::find(plan.roots.begin(), plan.roots.end(), int(r.index)) == plan.roots.end())
      below->push_back({size_t(r.index), pid_t(r.pid)});
    ++k;
  }
  close(g_sync.ready[0]);
  if (failed) {
    // Nothing was restored yet: everyone we made still waits for `go`. Take the tree down.
    for (pid_t p : made) kill(p, SIGKILL);
    for (pid_t p : *roots_out) {
      kill(p, SIGKILL);
      while (waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    roots_out->clear();
    if (below) below->clear();
  }
  close(g_sync.go[1]);  // EOF: the whole tree exists, every process execs its restorer
  return s;
}

}  // namespace revive::proctree
