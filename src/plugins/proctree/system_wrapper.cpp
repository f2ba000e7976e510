// system(): glibc's spawns its shell with an internal posix_spawn that no wrapper sees, and the parent
// would return from it before the shell joined the computation. Ours forks through the tree's fork()
// (the child is in the computation before the parent goes on) and execs /bin/sh through our execl, with
// POSIX's signal rules: SIGINT and SIGQUIT ignored and SIGCHLD blocked in the caller while it waits.
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" __attribute__((visibility("default"))) int system(const char* cmd) {
  if (!cmd) return 1;  // a shell is available
  struct sigaction ign = {}, old_int, old_quit;
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old_mask);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    execl("/bin/sh", "sh", "-c", cmd, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  if (pid > 0) {
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) {
        status = -1;
        break;
      }
    }
  }
  int saved = errno;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  errno = saved;
  return status;
}
