/* Signalfds read in every way a program may, restarted with virtual pids: each record's ssi_pid must be
 * the sender as the reader knows it (tests/vpid, docs/process-trees.md "Virtual pids").
 *   P: a signalfd for SIGUSR2, a copy of it by dup(), one by fcntl(F_DUPFD_CLOEXEC) at fd >= 1500; each
 *      round P signals itself and reads one of the three: with read() (built with _FORTIFY_SOURCE: the
 *      call is __read_chk) or readv() with the record split across two iovecs inside ssi_pid.
 *   C: forked by P, makes a signalfd for SIGRTMIN without O_CLOEXEC and execs this program ("reader"),
 *      which inherits it and reads, with readv, one signal from P per round: its sender must be getppid().
 * Only P prints (one line per round), so the output of a restarted run is comparable byte for byte. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms) {
  struct timespec t = {0, ms * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* One record through readv, split 13 | 115 bytes: ssi_pid (bytes 12..15) straddles the two iovecs. */
static int read_split(int fd, struct signalfd_siginfo* out) {
  char a[13], b[sizeof *out - 13];
  struct iovec v[2] = {{a, sizeof a}, {b, sizeof b}};
  ssize_t got;
  do got = readv(fd, v, 2); while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof *out) return 0;
  memcpy(out, a, sizeof a);
  memcpy((char*)out + sizeof a, b, sizeof b);
  return 1;
}

static int reader(int rounds, int fd) {
  int bad = 0;
  for (int i = 0; i < rounds; i++) {
    struct signalfd_siginfo s;
    if (!read_split(fd, &s) || s.ssi_signo != (uint32_t)SIGRTMIN || (pid_t)s.ssi_pid != getppid()) bad++;
  }
  return bad ? 100 + (bad > 50 ? 50 : bad) : 7;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 3 && strcmp(argv[1], "reader") == 0) return reader(atoi(argv[2]), atoi(argv[3]));
  const int rounds = argc > 1 ? atoi(argv[1]) : 200;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  sigaddset(&s, SIGRTMIN);
  sigprocmask(SIG_BLOCK, &s, NULL); /* inherited by C, kept across its exec */

  pid_t C = fork();
  if (C < 0) return 90;
  if (C == 0) {
    sigset_t r;
    sigemptyset(&r);
    sigaddset(&r, SIGRTMIN);
    int fd = signalfd(-1, &r, 0); /* no O_CLOEXEC: the exec'ed image inherits it */
    char n[16], f[16];
    snprintf(n, sizeof n, "%d", rounds);
    snprintf(f, sizeof f, "%d", fd);
    execl(argv[0], argv[0], "reader", n, f, (char*)NULL);
    _exit(91);
  }
  const pid_t P = getpid();
  sigset_t u;
  sigemptyset(&u);
  sigaddset(&u, SIGUSR2);
  const int sfd = signalfd(-1, &u, SFD_CLOEXEC);
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < 1600 && rl.rlim_max >= 1600) {
    rl.rlim_cur = 1600;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  const int fds[3] = {sfd, dup(sfd), fcntl(sfd, F_DUPFD_CLOEXEC, 1500)};
  printf("P: signalfd, a dup and a copy at fd >= 1500: %s\n", fds[1] >= 0 && fds[2] >= 1500 ? "made" : "FAILED");
  for (int i = 0; i < rounds; i++) {
    char fails[128] = "";
    struct signalfd_siginfo si;
    int ok = 0;
    if (kill(P, SIGUSR2) == 0) {
      if (i % 2 == 0) {
        ssize_t got;
        do got = read(fds[i % 3], &si, sizeof si); while (got < 0 && errno == EINTR);
        ok = got == (ssize_t)sizeof si;
      } else {
        ok = read_split(fds[i % 3], &si);
      }
    }
    if (!ok || si.ssi_signo != SIGUSR2 || (pid_t)si.ssi_pid != P)
      strcat(fails, i % 3 == 0 ? " signalfd" : i % 3 == 1 ? " dup" : " F_DUPFD>=1500");
    if (kill(C, SIGRTMIN) != 0) strcat(fails, " kill(C)");
    printf("round %d:%s\n", i, fails[0] ? fails : " ok");
    nap(10);
  }
  int st = 0;
  pid_t w = waitpid(C, &st, 0);
  printf("C (exec'ed, inherited signalfd read with readv): %s, exit %d\n", w == C ? "same pid" : "OTHER PID",
         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 0;
}
