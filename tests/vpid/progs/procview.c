/* Ids a program gets from libc's syscall() and from the text of /proc files, restarted with virtual pids
 * (tests/vpid, docs/process-trees.md "Virtual pids"): they must be the ids getpid() & co. give.
 * P has a thread T and a child C (leading its own process group). Every round P checks:
 *   syscall(SYS_getpid/gettid/getppid/getpgid/getsid) against getpid() & co.; syscall(SYS_tgkill) to
 *   itself and to T, syscall(SYS_kill, C, 0), syscall(SYS_pidfd_open, C), syscall(SYS_wait4, C, WNOHANG);
 *   /proc/self/stat (fields pid, ppid, pgrp, session) read with open+read and with fopen,
 *   /proc/self/status (Pid, PPid, Tgid, TracerPid, NSpid), /proc/C/stat (pid, ppid, pgrp),
 *   /proc/self/task/T/stat and /proc/thread-self/status of T, the listing of /proc/self/task (P and T
 *   among its entries), the listing of /proc (P and C among its entries; both listings also through
 *   fdopendir, scandir and getdents64, and of both through nftw, whose entries it must also stat), ftw of
 *   /proc/C/fdinfo, /proc/self/task/P/children (C among them), and /proc/self/stat and /proc/C/stat held
 *   open since the start and read again with pread (they cross every checkpoint).
 * It prints one line per round naming what differed, then ends C with syscall(SYS_kill) and reaps it with
 * syscall(SYS_wait4): the output holds no id, so a restarted run prints byte for byte what a run
 * without checkpoints prints. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms) {
  struct timespec t = {0, ms * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static volatile sig_atomic_t g_self_hits, g_thread_hits;
static volatile pid_t g_T; /* T's id as T itself gets it from syscall(SYS_gettid) */

static void on_usr1(int sig) { (void)sig; g_self_hits++; }
static void on_usr2(int sig) { (void)sig; g_thread_hits++; }

static void* thread_main(void* arg) {
  (void)arg;
  g_T = (pid_t)syscall(SYS_gettid);
  for (;;) pause();
  return NULL;
}

/* Field `field` of stat text (1: pid; 3..: after the command name), or -1. */
static long stat_field(const char* text, int field) {
  if (field == 1) return atol(text);
  const char* p = strrchr(text, ')');
  for (int f = 2; p && f < field; f++) p = strchr(p + 1, ' ');
  return p ? atol(p + 1) : -1;
}

/* The number after "key:\t" in status text, or -1. */
static long status_field(const char* text, const char* key) {
  char k[32];
  snprintf(k, sizeof k, "\n%s:", key);
  const char* p = strstr(text, k);
  return p ? atol(p + strlen(k)) : -1;
}

static int read_path(const char* path, char* buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  buf[n > 0 ? n : 0] = 0;
  return n > 0;
}

static int read_stream(const char* path, char* buf, size_t cap) {
  FILE* f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return n > 0;
}

/* Whether the listing of `dir` names both `a` and `b` (the engine may have threads of its own). */
static int lists(DIR* d, pid_t a, pid_t b) {
  if (!d) return 0;
  int seen = 0;
  for (struct dirent* e; (e = readdir(d));) {
    if (atoi(e->d_name) == a) seen |= 1;
    if (atoi(e->d_name) == b) seen |= 2;
  }
  closedir(d);
  return seen == 3;
}

static int dir_lists(const char* dir, pid_t a, pid_t b) { return lists(opendir(dir), a, b); }

/* The same through fdopendir (find's fts, Python's os.listdir(fd)) and through scandir. */
static int fddir_lists(const char* dir, pid_t a, pid_t b) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d && fd >= 0) close(fd);
  return lists(d, a, b);
}

/* scandir, or scandirat relative to `at` (an open directory) when at >= 0. */
static int scandirat_lists(int at, const char* dir, pid_t a, pid_t b) {
  struct dirent** v;
  int n = at >= 0 ? scandirat(at, dir, &v, NULL, alphasort) : scandir(dir, &v, NULL, alphasort);
  if (n < 0) return 0;
  int seen = 0;
  for (int i = 0; i < n; ++i) {
    if (atoi(v[i]->d_name) == a) seen |= 1;
    if (atoi(v[i]->d_name) == b) seen |= 2;
    free(v[i]);
  }
  free(v);
  return seen == 3;
}

static int scandir_lists(const char* dir, pid_t a, pid_t b) { return scandirat_lists(-1, dir, a, b); }

/* nftw of `dir` one level deep (FTW_ACTIONRETVAL: each subdirectory skipped): both `a` and `b` listed,
 * as directories it could stat (a /proc/<pid> it could not enter would be FTW_NS). */
static pid_t g_walk_a, g_walk_b;
static int g_walk_seen;
static int walk_entry(const char* path, const struct stat* st, int type, struct FTW* f) {
  (void)st;
  if (f->level != 1) return FTW_CONTINUE;
  const pid_t v = (pid_t)atoi(path + f->base);
  if (type == FTW_D && v == g_walk_a) g_walk_seen |= 1;
  if (type == FTW_D && v == g_walk_b) g_walk_seen |= 2;
  return FTW_SKIP_SUBTREE;
}
/* A walk of /proc fails (-1) when any process on the machine ends while glibc visits its /proc/<pid>:
 * ENOENT when it is gone between the stat and the open of that directory (ftw_dir gives up on an open
 * that fails with anything but EACCES), ESRCH when the stat finds it exiting. Natively as under the
 * plugin's walker: on a busy machine that failed the native reference run now and then ("nftw(/proc)").
 * Such a walk is made again. */
static int nftw_lists(const char* dir, pid_t a, pid_t b) {
  g_walk_a = a;
  g_walk_b = b;
  for (int attempt = 0; attempt < 20; ++attempt) {
    g_walk_seen = 0;
    errno = 0;
    const int r = nftw(dir, walk_entry, 8, FTW_PHYS | FTW_ACTIONRETVAL);
    const int e = errno;
    if (r == -1 && (e == ENOENT || e == ESRCH)) continue;
    if (r == 0 && g_walk_seen == 3) return 1;
    fprintf(stderr, "procview: nftw(%s): returned %d, errno %d, listed %s%s\n", dir, r, e,
            g_walk_seen & 1 ? "" : " not-self", g_walk_seen & 2 ? "" : " not-other");
    return 0;
  }
  fprintf(stderr, "procview: nftw(%s): 20 walks met a process ending\n", dir);
  return 0;
}
/* ftw of /proc/<C>/fdinfo (C's pid as the program knows it): its root is reached as a directory and
 * C's descriptor 0 in it (glibc's ftw would name the kernel's /proc/<C>: another process, or none). */
static int g_ftw_root, g_ftw_fd0;
static int ftw_entry(const char* path, const struct stat* st, int type) {
  (void)st;
  const char* slash = strrchr(path, '/');
  if (type == FTW_D && strcmp(slash, "/fdinfo") == 0) g_ftw_root = 1;
  if (type == FTW_F && strcmp(slash, "/0") == 0) g_ftw_fd0 = 1;
  return 0;
}
static int ftw_reaches(pid_t c) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fdinfo", (int)c);
  g_ftw_root = g_ftw_fd0 = 0;
  return ftw(dir, ftw_entry, 4) == 0 && g_ftw_root && g_ftw_fd0;
}

/* And through libc's getdents64() on a descriptor (what ls-like tools of other runtimes do). */
/* raw: through libc's syscall(SYS_getdents64), and the directory opened by syscall(SYS_openat). */
static int getdents_via(int raw, const char* dir, pid_t a, pid_t b) {
  int fd = raw ? (int)syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
               : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[16384];
  int seen = 0;
  for (ssize_t n; (n = raw ? syscall(SYS_getdents64, fd, buf, sizeof buf) : getdents64(fd, buf, sizeof buf)) > 0;)
    for (ssize_t off = 0; off < n;) {
      struct dirent64* e = (struct dirent64*)(buf + off);
      if (atoi(e->d_name) == a) seen |= 1;
      if (atoi(e->d_name) == b) seen |= 2;
      off += e->d_reclen;
    }
  close(fd);
  return seen == 3;
}

static int getdents_lists(const char* dir, pid_t a, pid_t b) { return getdents_via(0, dir, a, b); }

static int read_held(int fd, char* buf, size_t cap) {
  ssize_t n = pread(fd, buf, cap - 1, 0);
  buf[n > 0 ? n : 0] = 0;
  return n > 0;
}

#define CHECK(cond, what) \
  do {                    \
    if (!(cond)) strcat(fails, " " what); \
  } while (0)

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 250;
  setvbuf(stdout, NULL, _IOLBF, 0);
  const pid_t P = getpid();
  pid_t C = fork();
  if (C < 0) return 90;
  if (C == 0) {
    setpgid(0, 0);
    /* Ended by P; if P dies first (a failed run), C goes too instead of lingering as an orphan. */
    for (;;) {
      nap(200);
      if (getppid() != P) _exit(0);
    }
  }
  setpgid(C, C); /* whichever of the two runs first */
  signal(SIGUSR1, on_usr1);
  signal(SIGUSR2, on_usr2);
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, NULL) != 0) return 91;
  while (!g_T) nap(1);
  char cpath[64], tpath[64];
  snprintf(cpath, sizeof cpath, "/proc/%d/stat", (int)C);
  const int held_self = open("/proc/self/stat", O_RDONLY);
  const int held_child = open(cpath, O_RDONLY);
  if (held_self < 0 || held_child < 0) return 92;
  for (int i = 0; i < rounds; i++) {
    char fails[1024] = "", buf[4096];
    const pid_t me = getpid(), T = g_T;
    CHECK(syscall(SYS_getpid) == me, "getpid");
    CHECK(syscall(SYS_gettid) == gettid(), "gettid");
    CHECK(syscall(SYS_getppid) == getppid(), "getppid");
    CHECK(syscall(SYS_getpgid, 0) == getpgrp() && syscall(SYS_getpgid, C) == C, "getpgid");
    CHECK(syscall(SYS_getsid, 0) == getsid(0), "getsid");
    const int before = g_self_hits;
    CHECK(syscall(SYS_tgkill, me, gettid(), SIGUSR1) == 0 && g_self_hits == before + 1, "tgkill(self)");
    const int tbefore = g_thread_hits;
    const int sent = syscall(SYS_tgkill, me, T, SIGUSR2) == 0;
    CHECK(sent, "tgkill(T)");
    for (int w = 0; sent && w < 1000 && g_thread_hits == tbefore; w++) nap(1);
    CHECK(!sent || g_thread_hits == tbefore + 1, "T-signalled");
    CHECK(syscall(SYS_kill, C, 0) == 0, "kill(C,0)");
    const long pfd = syscall(SYS_pidfd_open, C, 0);
    CHECK(pfd >= 0, "pidfd_open(C)");
    if (pfd >= 0) close((int)pfd);
    CHECK(syscall(SYS_wait4, C, NULL, WNOHANG, NULL) == 0, "wait4(C,WNOHANG)");
    /* /proc/self/stat, two ways */
    int ok = read_path("/proc/self/stat", buf, sizeof buf);
    CHECK(ok && stat_field(buf, 1) == me && stat_field(buf, 4) == getppid() && stat_field(buf, 5) == getpgrp() &&
              stat_field(buf, 6) == getsid(0),
          "/proc/self/stat");
    ok = read_stream("/proc/self/stat", buf, sizeof buf);
    CHECK(ok && stat_field(buf, 1) == me && stat_field(buf, 4) == getppid(), "fopen(/proc/self/stat)");
    ok = read_path("/proc/self/status", buf, sizeof buf);
    CHECK(ok && status_field(buf, "Pid") == me && status_field(buf, "PPid") == getppid() &&
              status_field(buf, "Tgid") == me && status_field(buf, "TracerPid") == 0 &&
              status_field(buf, "NSpid") == me,
          "/proc/self/status");
    ok = read_path(cpath, buf, sizeof buf);
    CHECK(ok && stat_field(buf, 1) == C && stat_field(buf, 4) == me && stat_field(buf, 5) == C, "/proc/C/stat");
    snprintf(tpath, sizeof tpath, "/proc/self/task/%d/stat", (int)T);
    ok = read_path(tpath, buf, sizeof buf);
    CHECK(ok && stat_field(buf, 1) == T && stat_field(buf, 4) == getppid(), "/proc/self/task/T/stat");
    ok = read_path("/proc/thread-self/status", buf, sizeof buf);
    CHECK(ok && status_field(buf, "Pid") == gettid() && status_field(buf, "Tgid") == me, "/proc/thread-self/status");
    CHECK(dir_lists("/proc/self/task", me, T), "readdir(/proc/self/task)");
    CHECK(dir_lists("/proc", me, C), "readdir(/proc)");
    CHECK(fddir_lists("/proc", me, C), "fdopendir(/proc)");
    CHECK(fddir_lists("/proc/self/task", me, T), "fdopendir(/proc/self/task)");
    CHECK(scandir_lists("/proc", me, C), "scandir(/proc)");
    CHECK(scandir_lists("/proc/self/task", me, T), "scandir(/proc/self/task)");
    CHECK(scandirat_lists(AT_FDCWD, "/proc/self/task", me, T), "scandirat(AT_FDCWD, /proc/self/task)");
    {
      int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      CHECK(proc_fd >= 0 && scandirat_lists(proc_fd, "self/task", me, T), "scandirat(/proc fd, self/task)");
      if (proc_fd >= 0) close(proc_fd);
    }
    CHECK(nftw_lists("/proc", me, C), "nftw(/proc)");
    CHECK(nftw_lists("/proc/self/task", me, T), "nftw(/proc/self/task)");
    CHECK(ftw_reaches(C), "ftw(/proc/C/fdinfo)");
    CHECK(getdents_lists("/proc", me, C), "getdents64(/proc)");
    CHECK(getdents_lists("/proc/self/task", me, T), "getdents64(/proc/self/task)");
    CHECK(getdents_via(1, "/proc/self/task", me, T), "syscall(SYS_getdents64, /proc/self/task)");
    {
      int sfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
      CHECK(sfd >= 0 && read_held(sfd, buf, sizeof buf) && stat_field(buf, 1) == me, "syscall(SYS_openat, /proc/self/stat)");
      if (sfd >= 0) close(sfd);
    }
    snprintf(tpath, sizeof tpath, "/proc/self/task/%d/children", (int)me);
    ok = read_path(tpath, buf, sizeof buf);
    int has_c = 0;
    for (char *p = buf, *end; ok && *p; p = end) {
      long v = strtol(p, &end, 10);
      if (end == p) break;
      has_c |= v == C;
    }
    CHECK(has_c, "/proc/self/task/P/children");
    ok = read_held(held_self, buf, sizeof buf);
    CHECK(ok && stat_field(buf, 1) == me, "held /proc/self/stat");
    ok = read_held(held_child, buf, sizeof buf);
    CHECK(ok && stat_field(buf, 1) == C && stat_field(buf, 4) == me, "held /proc/C/stat");
    printf("round %d%s%s\n", i, fails[0] ? " FAIL:" : " ok", fails);
    nap(10);
  }
  int st = 0;
  if (syscall(SYS_kill, C, SIGTERM) != 0) return 93;
  if (syscall(SYS_wait4, C, &st, 0, NULL) != C) return 94;
  printf("child ended by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
  return 0;
}
