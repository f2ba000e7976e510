// exec*() and posix_spawn*(): the new program gets LD_PRELOAD and the REVIVE_* environment back (even
// when the caller passes an envp without them), so a dynamically linked program stays in the
// computation. exec in the same process also keeps the coordinator socket open across the exec: the
// new image connects first and only then closes it, so a checkpoint never sees the process missing
// (one that catches the exec in between fails, as a disconnect, instead of going without the process).
// A program that cannot load us (static) is outside the computation: it gets neither (exec_static.cpp).
// glibc's own execv/execvp/execl* call its internal execve, not ours: each is wrapped.
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/files/created_log.h"
#include "plugins/vpid/vpid.h"
#include "plugins/proctree/engine_hooks.h"
#include "plugins/proctree/proctree.h"

extern char** environ;

namespace {

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using SpawnFn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                        char* const[], char* const[]);
ExecveFn g_execve, g_execvpe;
SpawnFn g_spawn, g_spawnp;

// "revive: pid N: exec PATH: ..." for a program that cannot load us (a documented policy, not an error).
void warn_outside(const char* what, long pid, const char* path, const char* consequence) {
  char buf[PATH_MAX + 256];
  revive::plugins::Msg(buf, sizeof buf)
      .s("pid ").i(pid).s(": ").s(what).s(" ").s(path)
      .s(": statically linked (or not a 64-bit program of this machine), it cannot load the checkpoint "
         "library; ").s(consequence);
  revive::plugins::warn(buf);
}

// Runs the real exec with the fixed environment and the coordinator socket inheritable; on failure puts
// the close-on-exec flag back and returns -1 with exec's errno. A program that cannot load us (static)
// does not get the socket: the exec closes it, the coordinator sees this process leave, and checkpoints
// of the rest of the computation go on without it (exec_static.cpp).
int exec_with(ExecveFn* slot, const char* name, const char* path, char* const argv[], char* const envp[]) {
  ExecveFn real = revive::plugins::next_or_enosys(slot, name);
  if (!real) return -1;
  // A lazily joining fork child joins first (the new image inherits the connection); a parent with
  // unjoined children lets them join (the new image will not know them: its pending table starts empty).
  if (revive::inject::coord_join_now) revive::inject::coord_join_now();
  revive::proctree::join_children_before_leaving();
  int cfd = revive::inject::coord_fd_for_exec ? revive::inject::coord_fd_for_exec() : -1;
  if (cfd >= 0) {
    char resolved[PATH_MAX];
    if (!revive::proctree::program_loads_library(path, slot == &g_execvpe, resolved, sizeof resolved)) {
      warn_outside("exec", getpid(), resolved[0] ? resolved : path,
                   "this process leaves the computation and is not checkpointed from now on");
      cfd = -1;
    }
  }
  char** env = revive::proctree::fixed_env(envp, cfd, -1);
  if (!env) {
    errno = ENOMEM;
    return -1;
  }
  if (cfd >= 0) fcntl(cfd, F_SETFD, 0);
  if (revive::inject::before_exec) revive::inject::before_exec();
  real(path, argv, env);
  int saved = errno;
  if (revive::inject::after_failed_exec) revive::inject::after_failed_exec();
  if (cfd >= 0) fcntl(cfd, F_SETFD, FD_CLOEXEC);
  errno = saved;
  return -1;  // env leaks on a failed exec: rare, and the caller usually exits
}

// posix_spawn runs glibc's internal exec, so the child cannot be made to connect before the call
// returns; instead it inherits the write end of a pipe (REVIVE_SPAWN_SYNC_FD) and the new image writes
// a byte once connected. Meanwhile a checkpoint is refused as during a fork. A program that cannot load
// us (static) is recognised first (exec_static.cpp) and not waited for; one misjudged never writes: the
// parent goes on after kSpawnWaitMs.
constexpr int kSpawnWaitMs = 2000;

int spawn_with(SpawnFn* slot, const char* name, pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
               const posix_spawnattr_t* at, char* const argv[], char* const envp[]) {
  SpawnFn real = revive::plugins::next_symbol(slot, name);
  if (!real) return ENOSYS;
  // A lazily joining fork child joins first: the spawned image must find its parent a member.
  if (revive::inject::coord_join_now) revive::inject::coord_join_now();
  int sync[2] = {-1, -1};
  const bool coord = revive::inject::coord_fd_for_exec && revive::inject::coord_fd_for_exec() >= 0;
  char resolved[PATH_MAX];
  // A static program would never write the byte: no pipe, no wait (it is outside the computation).
  const bool joins = !coord || revive::proctree::program_loads_library(path, slot == &g_spawnp, resolved,
                                                                       sizeof resolved);
  // A socketpair (a checkpoint peeks at the byte, inflight_all_joined); the child's end is inherited
  // through the exec.
  if (coord && joins && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) == 0) fcntl(sync[1], F_SETFD, 0);
  char** env = revive::proctree::fixed_env(envp, -1, sync[1]);
  if (!env) {
    if (sync[0] >= 0) close(sync[0]), close(sync[1]);
    return ENOMEM;
  }
  const int inflight = revive::proctree::inflight_begin(sync[0]);
  pid_t child = 0;
  // The child opens the files of fa's actions before its exec, where no wrapper runs (files plugin).
  const int64_t t_actions = revive::plugins::spawn_actions_before(fa);
  int r = real(pid ? pid : &child, path, fa, at, argv, env);
  revive::plugins::spawn_actions_after(fa, r, t_actions);
  if (sync[1] >= 0) close(sync[1]);
  if (sync[0] >= 0) {
    if (r == 0) {
      struct pollfd p = {sync[0], POLLIN, 0};
      while (poll(&p, 1, kSpawnWaitMs) < 0 && errno == EINTR) {
      }
    }
  }
  revive::proctree::inflight_end(inflight);
  if (sync[0] >= 0) close(sync[0]);
  // The program's id for the child (its image registered itself before its byte).
  if (r == 0 && pid && *pid > 0) *pid = revive::vpid::to_virt(*pid);
  if (r == 0 && !joins)
    warn_outside("posix_spawn", pid ? *pid : child, resolved[0] ? resolved : path,
                 "the spawned process is outside the computation and is not checkpointed");
  if (env != envp) free(env);  // the strings are ours or the caller's; only the array is new
  return r;
}

// execl-style argument lists into an array on the stack (the argument count is the caller's).
#define COLLECT_ARGS(first, argv, with_envp, envp_out)      \
  size_t n_ = 1;                                            \
  {                                                         \
    va_list ap;                                             \
    va_start(ap, first);                                    \
    while (va_arg(ap, const char*)) ++n_;                   \
    va_end(ap);                                             \
  }                                                         \
  char* argv[n_ + 1];                                       \
  {                                                         \
    va_list ap;                                             \
    va_start(ap, first);                                    \
    argv[0] = const_cast<char*>(first);                     \
    for (size_t i_ = 1; i_ <= n_; ++i_) argv[i_] = va_arg(ap, char*); \
    if (with_envp) envp_out = va_arg(ap, char**);           \
    va_end(ap);                                             \
  }

}  // namespace

extern "C" {
#define EXPORT __attribute__((visibility("default")))

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return exec_with(&g_execve, "execve", path, argv, envp);
}
EXPORT int execv(const char* path, char* const argv[]) { return exec_with(&g_execve, "execve", path, argv, environ); }
EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_with(&g_execvpe, "execvpe", file, argv, envp);
}
EXPORT int execvp(const char* file, char* const argv[]) {
  return exec_with(&g_execvpe, "execvpe", file, argv, environ);
}
EXPORT int execl(const char* path, const char* arg, ...) {
  char** unused = nullptr;
  COLLECT_ARGS(arg, argv, false, unused);
  (void)unused;
  return exec_with(&g_execve, "execve", path, argv, environ);
}
EXPORT int execlp(const char* file, const char* arg, ...) {
  char** unused = nullptr;
  COLLECT_ARGS(arg, argv, false, unused);
  (void)unused;
  return exec_with(&g_execvpe, "execvpe", file, argv, environ);
}
EXPORT int execle(const char* path, const char* arg, ...) {
  char** envp = nullptr;
  COLLECT_ARGS(arg, argv, true, envp);
  return exec_with(&g_execve, "execve", path, argv, envp);
}
EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                       const posix_spawnattr_t* at, char* const argv[], char* const envp[]) {
  return spawn_with(&g_spawn, "posix_spawn", pid, path, fa, at, argv, envp);
}
EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                        const posix_spawnattr_t* at, char* const argv[], char* const envp[]) {
  return spawn_with(&g_spawnp, "posix_spawnp", pid, file, fa, at, argv, envp);
}
}
