#include "cli/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace revive::cli {

bool InSlurmJob() {
  const char* id = getenv("SLURM_JOB_ID");
  return id && *id;
}

Status SlurmRequeue() {
  const char* id = getenv("SLURM_JOB_ID");
  if (!id || !*id) return Status::InvalidArgument("requeue: SLURM_JOB_ID is not set (not inside a Slurm job)");
  std::string job = id;
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) return Status::FromErrno("requeue: pipe", errno);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(err[0]);
    close(err[1]);
    return Status::FromErrno("requeue: fork", e);
  }
  if (pid == 0) {
    dup2(err[1], 2);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) dup2(null, 1);
    signal(SIGPIPE, SIG_DFL);
    execlp("scontrol", "scontrol", "requeue", job.c_str(), (char*)nullptr);
    fprintf(stderr, "cannot run scontrol: %s", strerror(errno));
    _exit(127);
  }
  close(err[1]);
  // Read everything before waiting: scontrol blocks if its stderr pipe fills.
  std::string text;
  char buf[512];
  for (;;) {
    ssize_t n = read(err[0], buf, sizeof buf);
    if (n > 0 && text.size() < 4096) text.append(buf, size_t(n));
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;
  }
  close(err[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::OK();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string how = WIFEXITED(st) ? "exit status " + std::to_string(WEXITSTATUS(st))
                                  : "signal " + std::to_string(WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return Status::IOError("scontrol requeue " + job + " failed (" + how + ")" + (text.empty() ? "" : ": " + text));
}

}  // namespace revive::cli
