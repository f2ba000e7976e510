/* Every id a process tree sees, before and after a restart that could not recreate pids (virtual pids,
 * docs/process-trees.md). The main process P has a thread T and two children: A (leads its own process
 * group) and B, which reads A's pid from a file P wrote and sends A a queued signal every round. Every
 * round P checks its ids and uses A's: kill(A, 0), getpgid(A), getsid(A), /proc/A/stat and
 * /proc/self/task/T readable, tgkill(P, T) (T acknowledges), kill of a pid nobody has (ESRCH); every 40
 * rounds it forks a short-lived child C and reaps it with waitpid (C checks its getpid() against what
 * fork returned, through its exit status). A and B check their own ids each round. Only P prints (one
 * line per round: which checks failed, none expected), so the output is the same in every run; at the
 * end P reaps B and A with waitpid and prints their statuses (A: how many of B's signals it got). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static volatile int t_tid, t_count, t_stop, t_bad_sender;

static void* thread_main(void* arg) {
  (void)arg;
  t_tid = gettid();
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN + 1);
  while (!__atomic_load_n(&t_stop, __ATOMIC_ACQUIRE)) {
    struct timespec to = {0, 20000000};
    siginfo_t si;
    if (sigtimedwait(&s, &si, &to) == SIGRTMIN + 1) {
      if (si.si_pid != getpid()) t_bad_sender++; /* pthread_kill/tgkill from P: si_pid is P */
      __atomic_add_fetch(&t_count, 1, __ATOMIC_ACQ_REL);
    }
    if (gettid() != t_tid) printf("thread: gettid changed\n");
  }
  return NULL;
}

static int readable(const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0;
}

/* Field `field` (1 = pid, 4 = ppid) of a /proc stat file, or -1. Its contents are the kernel's ids. */
static long stat_field(const char* path, int field) {
  char buf[512];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  if (field == 1) return atol(buf);
  const char* p = strrchr(buf, ')');
  if (!p) return -1;
  for (int f = 2; f < field && *p; f++) {
    p = strchr(p + 1, ' ');
    if (!p) return -1;
  }
  return atol(p + 1);
}

/* /proc/PID/stat names the process we call PID: its parent is the one /proc/self/stat says is `parent`
 * (field 1: ourselves, field 4: our parent), compared in the kernel's ids. */
static int stat_names(pid_t pid, int parent) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  /* Both read again when they differ: a checkpoint and restart between the two reads changes the
   * kernel's ids in between. */
  for (int attempt = 0; attempt < 3; attempt++) {
    long their_ppid = stat_field(path, 4), want = stat_field("/proc/self/stat", parent);
    if (their_ppid > 0 && their_ppid == want) return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 300;
  setvbuf(stdout, NULL, _IOLBF, 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN);
  sigaddset(&s, SIGRTMIN + 1);
  sigaddset(&s, SIGUSR2);
  sigprocmask(SIG_BLOCK, &s, NULL);
  const pid_t P = getpid(), PG = getpgrp(), S = getsid(0);
  /* P's own SIGUSR2, read through a signalfd: its ssi_pid must be P as P knows itself. */
  sigset_t u;
  sigemptyset(&u);
  sigaddset(&u, SIGUSR2);
  const int sfd = signalfd(-1, &u, SFD_CLOEXEC);
  printf("P: gettid==getpid %d, getpgid(0)==getpgrp %d\n", gettid() == P, getpgid(0) == PG);

  pid_t A = fork();
  if (A < 0) return 90;
  if (A == 0) {
    const pid_t me = getpid();
    setpgid(0, 0);
    int got = 0, bad = 0;
    sigset_t r;
    sigemptyset(&r);
    sigaddset(&r, SIGRTMIN);
    for (int i = 0; got < rounds && i < rounds * 20; i++) {
      struct timespec to = {0, 10000000};
      if (sigtimedwait(&r, NULL, &to) == SIGRTMIN) got++;
      if (getpid() != me || getppid() != P || getpgrp() != me || gettid() != me || getsid(0) != S) bad++;
    }
    return bad ? 100 + (bad > 50 ? 50 : bad) : got == rounds ? 7 : 8;
  }
  while (getpgid(A) != A) nap(1);
  FILE* f = fopen("a.pid", "w");
  if (!f) return 91;
  fprintf(f, "%d\n", (int)A);
  fclose(f);

  pid_t B = fork();
  if (B < 0) return 92;
  if (B == 0) {
    const pid_t me = getpid();
    int a = 0, bad = 0;
    FILE* g = fopen("a.pid", "r");
    if (!g || fscanf(g, "%d", &a) != 1) return 93;
    fclose(g);
    for (int i = 0; i < rounds; i++) {
      if (kill(a, SIGRTMIN) != 0) bad++;
      if (getpgid(a) != a || !stat_names(a, 4)) bad++;
      if (getpid() != me || getppid() != P || getpgrp() != PG) bad++;
      nap(10);
    }
    return bad ? 100 + (bad > 50 ? 50 : bad) : 5;
  }

  pthread_t th;
  pthread_create(&th, NULL, thread_main, NULL);
  while (!t_tid) nap(1);
  const pid_t T = t_tid;
  char task[64];
  snprintf(task, sizeof task, "/proc/self/task/%d/stat", (int)T);
  /* Held open across the checkpoint: the restart must reopen A's file, not whatever has A's old kernel pid. */
  char apath[64];
  snprintf(apath, sizeof apath, "/proc/%d/stat", (int)A);
  const int afd = open(apath, O_RDONLY);
  int forks = 0;
  for (int i = 0; i < rounds; i++) {
    char fails[256] = "";
    if (getpid() != P || gettid() != P) strcat(fails, " getpid");
    if (getpgrp() != PG || getsid(0) != S) strcat(fails, " group");
    if (kill(A, 0) != 0) strcat(fails, " kill(A,0)");
    if (getpgid(A) != A) strcat(fails, " getpgid(A)");
    if (getsid(A) != S) strcat(fails, " getsid(A)");
    if (!stat_names(A, 1)) strcat(fails, " /proc/A/stat");
    if (!readable(task)) strcat(fails, " /proc/self/task/T");
    struct stat sb;
    char link[64], target[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)A);
    if (stat(apath, &sb) != 0) strcat(fails, " stat(/proc/A/stat)");
    if (access(task, R_OK) != 0) strcat(fails, " access(/proc/self/task/T)");
    if (readlink(link, target, sizeof target) <= 0) {
      char e[48];
      snprintf(e, sizeof e, " readlink(/proc/A/exe): %s", strerror(errno));
      strcat(fails, e);
    }
    int afd_ok = 0;
    for (int attempt = 0; attempt < 3 && !afd_ok; attempt++) {  /* as in stat_names() */
      char abuf[512];
      ssize_t an = pread(afd, abuf, sizeof abuf - 1, 0);
      abuf[an > 0 ? an : 0] = 0;
      const char* rp = strrchr(abuf, ')');
      long appid = -1;
      if (rp && sscanf(rp, ") %*c %ld", &appid) != 1) appid = -1;
      afd_ok = appid > 0 && appid == stat_field("/proc/self/stat", 1);
    }
    if (!afd_ok) strcat(fails, " open /proc/A/stat fd");
    cpu_set_t cpus;
    if (sched_getaffinity(A, sizeof cpus, &cpus) != 0 || sched_getaffinity(T, sizeof cpus, &cpus) != 0)
      strcat(fails, " sched_getaffinity");
    struct rlimit rl;
    if (prlimit(A, RLIMIT_NOFILE, NULL, &rl) != 0) strcat(fails, " prlimit(A)");
    int pfd = pidfd_open(A, 0);
    if (pfd < 0) strcat(fails, " pidfd_open(A)");
    else close(pfd);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
      struct ucred cr;
      socklen_t cl = sizeof cr;
      if (getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.pid != P) strcat(fails, " SO_PEERCRED");
      struct f_owner_ex ox = {F_OWNER_TID, T}, oy;
      if (fcntl(sv[0], F_SETOWN, A) != 0 || fcntl(sv[0], F_GETOWN) != A) strcat(fails, " F_SETOWN(A)");
      if (fcntl(sv[1], F_SETOWN_EX, &ox) != 0 || fcntl(sv[1], F_GETOWN_EX, &oy) != 0 || oy.pid != T)
        strcat(fails, " F_SETOWN_EX(T)");
      close(sv[0]);
      close(sv[1]);
    } else {
      strcat(fails, " socketpair");
    }
    errno = 0;
    if (kill(4000000, 0) != -1 || errno != ESRCH) strcat(fails, " kill(unused)");
    {
      struct signalfd_siginfo ssi;
      ssize_t got = -1;
      if (kill(P, SIGUSR2) == 0)
        do got = read(sfd, &ssi, sizeof ssi); while (got < 0 && errno == EINTR);
      if (got != (ssize_t)sizeof ssi || ssi.ssi_signo != SIGUSR2 || (pid_t)ssi.ssi_pid != P) strcat(fails, " signalfd");
    }
    int before = __atomic_load_n(&t_count, __ATOMIC_ACQUIRE);
    if (pthread_kill(th, SIGRTMIN + 1) != 0 || tgkill(P, T, SIGRTMIN + 1) != 0) strcat(fails, " tgkill(T)");
    for (int w = 0; w < 4000 && __atomic_load_n(&t_count, __ATOMIC_ACQUIRE) < before + 2; w++) nap(1);
    if (__atomic_load_n(&t_count, __ATOMIC_ACQUIRE) != before + 2) strcat(fails, " thread-ack");
    if (i % 40 == 39) {
      pid_t c = fork();
      if (c == 0) _exit(getppid() == P ? 40 + (getpid() == getpgid(0) ? 1 : 0) : 3);
      /* C's exit code tells whether its getpid() is what fork() returned here: it stored it nowhere
       * else, so ask it through its process group (C leads none: 40). */
      int st = 0;
      pid_t w = waitpid(c, &st, 0);
      if (w != c || !WIFEXITED(st) || WEXITSTATUS(st) != 40) strcat(fails, " fork+waitpid(C)");
      forks++;
    }
    printf("round %d:%s\n", i, fails[0] ? fails : " ok");
    nap(5);
  }
  int st = 0;
  pid_t w = waitpid(B, &st, 0);
  printf("B: waitpid %s, exit %d\n", w == B ? "same pid" : "OTHER PID", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  w = waitpid(A, &st, 0);
  printf("A: waitpid %s, exit %d\n", w == A ? "same pid" : "OTHER PID", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  errno = 0;
  w = waitpid(A, &st, WNOHANG);
  printf("A again: %d %s\n", (int)w, strerror(errno));
  __atomic_store_n(&t_stop, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  printf("forks %d, thread signals %d, with another sender's pid %d\n", forks, t_count, t_bad_sender);
  return 0;
}
