/* For tests/vpid's cut programs (waitcut.c, sigcut.c, handlercut.c, dircut.c): gates the driver opens,
 * and a child whose kernel pid differs from the pid fork() gives it. Run as root: the kernel's next pid
 * is steered (ns_last_pid) onto the caller's own virtual pid, an id in use in the table, so the child
 * gets a virtual id of its own (above 4194304); only then do two incarnations' ids tell a wrong
 * translation from a right one. Static inline: a program may use only gate(). */
#ifndef REVIVE_TESTS_VPID_OWN_CHILD_H_
#define REVIVE_TESTS_VPID_OWN_CHILD_H_
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* g_dir;  /* the gates' directory (argv[1]) */

/* Waits until the driver creates DIR/name. */
static inline void gate(const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  struct stat st;
  const struct timespec ts = {0, 10 * 1000 * 1000};
  while (stat(path, &st) != 0) nanosleep(&ts, NULL);
}

static inline int steer_next_pid(pid_t next) {
  int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
  if (fd < 0) return -1;
  char b[32];
  int n = snprintf(b, sizeof b, "%d", (int)next - 1);
  int ok = write(fd, b, (size_t)n) == n;
  close(fd);
  return ok ? 0 : -1;
}

/* Forks a child that runs body(read end of a pipe, arg) and _exits with its value; the write end goes to
 * *wfd. Retried until the child's virtual pid is its own. `who` names the program in messages. */
static inline pid_t own_child(const char* who, int (*body)(int rfd, void* arg), void* arg, int* wfd) {
  const pid_t self = getpid();
  for (int attempt = 0; attempt < 50; ++attempt) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    if (steer_next_pid(self) != 0) {
      fprintf(stderr, "%s: cannot write /proc/sys/kernel/ns_last_pid: %s\n", who, strerror(errno));
      return -1;
    }
    pid_t c = fork();
    if (c < 0) return -1;
    if (c == 0) {
      close(fds[1]);
      _exit(body(fds[0], arg));
    }
    close(fds[0]);
    if (c > 4194304) {
      *wfd = fds[1];
      return c;
    }
    close(fds[1]);  /* its kernel pid was not ours (another process took it first): again */
    int st;
    kill(c, SIGKILL);
    if (waitpid(c, &st, 0) != c) return -1;
  }
  fprintf(stderr, "%s: no child got a virtual pid of its own in 50 attempts\n", who);
  return -1;
}
#endif
