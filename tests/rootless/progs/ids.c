/* ids: a process tree that keeps checking the ids it was born with (issue 8: after a restart the program
 * sees the ids it had). The parent forks a child (a process group leader of its own) and starts a
 * thread; the child publishes its pid and tid in a file; every round each checks getpid, getppid,
 * gettid, getpgrp, getsid and its thread's capabilities against the values of round 0, and the parent
 * also uses the child's pid: kill(child, 0), kill(-child, 0), /proc/<child>/stat (its pid and ppid
 * fields), getpgid, sched_getaffinity, pidfd_open + pidfd_send_signal, tgkill, prlimit,
 * sched_getscheduler, process_vm_readv of a variable the child set, F_SETOWN/F_GETOWN, sigqueue, the
 * child's id as read back from the shared file, and finally waitpid. Output lines carry no id, only
 * verdicts, so an uninterrupted run and a restarted one print the same bytes. Any mismatch: the details
 * on stderr and a nonzero exit status.
 * The glibc functions, not syscall(SYS_...): with virtual pids (no pid namespace possible) only calls
 * through libc are translated (docs/process-trees.md).
 *   ids ROUNDS DELAY_MS */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct ids {
  pid_t pid, ppid, tid, pgrp, sid;
  unsigned long long cap_eff, cap_amb; /* this thread's: a restart must not leave it more than it had */
};

static void get_caps(struct ids* x) {
  char line[256];
  x->cap_eff = x->cap_amb = ~0ull;
  FILE* f = fopen("/proc/thread-self/status", "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "CapEff:", 7) == 0) x->cap_eff = strtoull(line + 7, NULL, 16);
    if (strncmp(line, "CapAmb:", 7) == 0) x->cap_amb = strtoull(line + 7, NULL, 16);
  }
  fclose(f);
}

static void get_ids(struct ids* x) {
  get_caps(x);
  x->pid = getpid();
  x->ppid = getppid();
  x->tid = gettid();
  x->pgrp = getpgrp();
  x->sid = getsid(0);
}

static int same(const char* who, int round, const struct ids* a, const struct ids* b) {
  int ok = a->pid == b->pid && a->ppid == b->ppid && a->tid == b->tid && a->pgrp == b->pgrp && a->sid == b->sid &&
           a->cap_eff == b->cap_eff && a->cap_amb == b->cap_amb;
  if (!ok)
    fprintf(stderr, "%s round %d: pid %d/%d ppid %d/%d tid %d/%d pgrp %d/%d sid %d/%d CapEff %llx/%llx CapAmb %llx/%llx\n",
            who, round, a->pid, b->pid, a->ppid, b->ppid, a->tid, b->tid, a->pgrp, b->pgrp, a->sid, b->sid, a->cap_eff,
            b->cap_eff, a->cap_amb, b->cap_amb);
  return ok;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int rounds, delay, check_ppid, virtual_ids;
static volatile int marker; /* the child sets it; the parent reads it with process_vm_readv */
/* The parent's SIGUSR2 after its last round, which still uses the child: a fixed number of extra rounds
 * (10, 200 ms) was not enough margin under load, where the parent's rounds (more calls each) fell behind
 * and its last process_vm_readv found the child gone (rootless.ids, "mask 0x10"). */
static volatile sig_atomic_t parent_done;
static void on_parent_done(int sig) {
  (void)sig;
  parent_done = 1;
}

/* The calls that take a pid, on the child: each must reach it (0 = all did). */
static int by_pid(pid_t child) {
  int fails = 0;
  int pfd = pidfd_open(child, 0);
  if (pfd < 0 || pidfd_send_signal(pfd, 0, NULL, 0) != 0) fails |= 1;
  if (pfd >= 0) close(pfd);
  if (tgkill(child, child, 0) != 0) fails |= 2;
  struct rlimit rl;
  if (prlimit(child, RLIMIT_NOFILE, NULL, &rl) != 0) fails |= 4;
  if (sched_getscheduler(child) < 0) fails |= 8;
  int got = 0;
  struct iovec local = {&got, sizeof got}, remote = {(void*)&marker, sizeof marker};
  if (process_vm_readv(child, &local, 1, &remote, 1, 0) != (ssize_t)sizeof got || got != 4242) fails |= 16;
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0 || fcntl(s, F_SETOWN, child) != 0 || fcntl(s, F_GETOWN) != child) fails |= 32;
  if (s >= 0) close(s);
  union sigval v = {0};
  if (sigqueue(child, 0, v) != 0) fails |= 64;
  return fails;
}
static struct ids thread_first;

static void* thread_main(void* arg) {
  (void)arg;
  for (int r = 0; r < rounds; ++r) {
    struct ids now;
    get_ids(&now);
    if (r == 0) thread_first = now;
    if (!check_ppid) now.ppid = thread_first.ppid;
    if (r > 0 && !same("thread", r, &now, &thread_first)) exit(3);
    sleep_ms(delay);
  }
  return NULL;
}

/* /proc/<pid>/stat: "pid (comm) state ppid ..." */
static int proc_stat(pid_t pid, pid_t* got_pid, pid_t* got_ppid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* close_paren = strrchr(buf, ')');
  if (!close_paren) return 0;
  *got_pid = (pid_t)atoi(buf);
  char state;
  int ppid;
  if (sscanf(close_paren + 2, "%c %d", &state, &ppid) != 2) return 0;
  *got_ppid = (pid_t)ppid;
  return 1;
}

int main(int argc, char** argv) {
  rounds = argc > 1 ? atoi(argv[1]) : 100;
  delay = argc > 2 ? atoi(argv[2]) : 20;
  setvbuf(stdout, NULL, _IONBF, 0);
  /* Its own session and process group: those ids are then the computation's, and come back. The parent
   * of the root is outside the computation; IDS_CHECK_PPID=1 where the restart keeps its pid too (a pid
   * namespace of the restart's own). */
  setsid();
  virtual_ids = getenv("IDS_VIRTUAL") && atoi(getenv("IDS_VIRTUAL")) == 1;
  check_ppid = getenv("IDS_CHECK_PPID") && atoi(getenv("IDS_CHECK_PPID")) == 1;
  struct ids first;
  get_ids(&first);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_parent_done;
  sigaction(SIGUSR2, &sa, NULL); /* before the fork: the child must not die of an early SIGUSR2 */
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    marker = 4242;
    setpgid(0, 0);
    struct ids cfirst;
    get_ids(&cfirst);
    FILE* f = fopen("child.id", "w");
    fprintf(f, "%d %d\n", (int)cfirst.pid, (int)cfirst.tid);
    fclose(f);
    for (int r = 0; !parent_done; ++r) { /* outlives the parent's last round, which uses it */
      struct ids now;
      get_ids(&now);
      if (!same("child", r, &now, &cfirst)) _exit(4);
      if (now.ppid != first.pid) _exit(5);
      sleep_ms(delay);
    }
    _exit(7);
  }
  setpgid(child, child); /* either may run first */
  pthread_t th;
  pthread_create(&th, NULL, thread_main, NULL);
  pid_t from_file = 0;
  for (int r = 0; r < rounds; ++r) {
    struct ids now;
    get_ids(&now);
    if (!check_ppid) now.ppid = first.ppid;
    if (!same("parent", r, &now, &first)) return 2;
    if (from_file == 0) {
      FILE* f = fopen("child.id", "r");
      int p = 0, t = 0;
      if (f && fscanf(f, "%d %d", &p, &t) == 2) from_file = p;
      if (f) fclose(f);
    }
    pid_t sp = 0, sppid = 0;
    cpu_set_t cpus;
    /* With virtual pids the path /proc/<child> is translated but not the numbers inside the file (docs/
     * process-trees.md): IDS_VIRTUAL=1 checks only that it opens. */
    int stat_ok = proc_stat(child, &sp, &sppid) && (virtual_ids || (sp == child && sppid == first.pid));
    int checks = kill(child, 0) == 0 && getpgid(child) == child && stat_ok &&
                 sched_getaffinity(child, sizeof cpus, &cpus) == 0 &&
                 (from_file == 0 || from_file == child) && kill(-child, 0) == 0;
    int calls = from_file ? by_pid(child) : 0; /* from_file: the child is past its marker */
    if (calls) {
      fprintf(stderr, "parent round %d: calls on child %d failed: mask %#x\n", r, (int)child, calls);
      return 9;
    }
    if (!checks) {
      fprintf(stderr, "parent round %d: child %d: kill %d pgid %d stat %d/%d file %d\n", r, (int)child, kill(child, 0),
              (int)getpgid(child), (int)sp, (int)sppid, (int)from_file);
      return 6;
    }
    printf("round %d: ids kept\n", r);
    sleep_ms(delay);
  }
  kill(child, SIGUSR2);
  pthread_join(th, NULL);
  int st = 0;
  pid_t w = waitpid(child, &st, 0);
  printf("waitpid: %s, child exit %d\n", w == child ? "the child" : "another pid", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  /* A pid nobody has: as natively, ESRCH. */
  errno = 0;
  int k = kill(0x3ffffff0, 0);
  printf("kill of an unused pid: %d %s\n", k, errno == ESRCH ? "ESRCH" : strerror(errno));
  return w == child && WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 8;
}
