/* Ids asked for in a tight loop while checkpoints come (docs/process-trees.md "Ids in hand across a
 * checkpoint"). A checkpoint's signal reaches a busy thread as the kernel returns from a system call:
 * here, nearly always from one of the calls below, with a kernel id in hand (getppid, getpgrp, getsid,
 * getpgid) or already translated for the call (getpgid(A), getsid(A), kill(A, 0)). After a restart with
 * virtual pids the wrapper must not read that id with the new incarnation's table (vpid.chain once
 * printed "A: waitpid same pid, exit 101": A had seen one wrong id of its own).
 * P forks A (A leads its own group); both spin for `ms` milliseconds a round, then nap 1 ms, for `rounds`
 * rounds, counting each check that fails. A prints its counts, then P reaps A by pid and prints its
 * own; none expected, so the output is the same in every run. P also stats /proc/<A> and opens
 * /proc/<A>/stat: a cut between the wrapper's translation of that path and the kernel's reading of it
 * (a timer interrupt while P runs its own code) must not leave the old incarnation's kernel pid in the
 * path (vpid.procview once failed "nftw(/proc)" so). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 200, ms = argc > 2 ? atoi(argv[2]) : 8;
  setvbuf(stdout, NULL, _IOLBF, 0);
  const pid_t P = getpid(), PG = getpgrp(), S = getsid(0);
  pid_t A = fork();
  if (A < 0) return 90;
  if (A == 0) {
    const pid_t me = getpid();
    if (setpgid(0, 0) != 0) return 91;
    long ppid = 0, pgrp = 0, pgid = 0, sid = 0;
    for (int i = 0; i < rounds; i++) {
      for (long end = now_ms() + ms; now_ms() < end;) {
        ppid += getppid() != P;
        pgrp += getpgrp() != me;
        pgid += getpgid(0) != me;
        sid += getsid(0) != S;
      }
      nap(1);
    }
    printf("A: wrong getppid %ld, getpgrp %ld, getpgid(0) %ld, getsid(0) %ld\n", ppid, pgrp, pgid, sid);
    return 7;
  }
  while (getpgid(A) != A) nap(1);
  long pgid = 0, sid = 0, alive = 0, grp = 0, pstat = 0, popen = 0;
  char adir[64], astat[80];
  snprintf(adir, sizeof adir, "/proc/%d", (int)A);
  snprintf(astat, sizeof astat, "%s/stat", adir);
  for (int i = 0; i < rounds; i++) {
    for (long end = now_ms() + ms; now_ms() < end;) {
      pgid += getpgid(A) != A;
      sid += getsid(A) != S;
      alive += kill(A, 0) != 0;
      grp += getpgrp() != PG;
      struct stat st;
      pstat += stat(adir, &st) != 0 || !S_ISDIR(st.st_mode);
      const int fd = open(astat, O_RDONLY | O_CLOEXEC);
      popen += fd < 0;
      if (fd >= 0) close(fd);
    }
    nap(1);
  }
  int st = 0;
  pid_t w = waitpid(A, &st, 0);
  printf("P: waitpid(A) %s, exit %d\n", w == A ? "same pid" : "OTHER PID", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  printf("P: wrong getpgid(A) %ld, getsid(A) %ld, kill(A,0) %ld, getpgrp %ld\n", pgid, sid, alive, grp);
  printf("P: failed stat(/proc/A) %ld, open(/proc/A/stat) %ld\n", pstat, popen);
  return 0;
}
