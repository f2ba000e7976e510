/* shm_bench MODE MIB NPROC DIR: NPROC processes share MIB MiB (MODE sysv: a SysV segment attached by
 * key in each child; anon: MAP_SHARED|MAP_ANONYMOUS inherited), filled with pseudo-random bytes by the
 * parent and read in full by every process, which then creates DIR/ready-<i> and waits for DIR/stop.
 * Then each checks bytes against what the parent wrote (the parent one per page, the children one per 64
 * pages) and prints "ok <i>" (or "BAD <i>").
 * For bench/shm/run.py: the checkpoint is taken while they wait, the restart ends as soon as they run. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t sample(const uint8_t* p, size_t len, size_t step) {
  uint64_t s = 0;
  for (size_t i = 0; i < len; i += step) s = s * 1099511628211u + p[i];
  return s;
}

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const int sysv = strcmp(argv[1], "sysv") == 0;
  const size_t len = (size_t)atol(argv[2]) << 20;
  const int n = atoi(argv[3]);
  const char* dir = argv[4];
  setvbuf(stdout, NULL, _IOLBF, 0);
  int id = -1;
  uint8_t* p;
  if (sysv) {
    id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    p = id >= 0 ? shmat(id, NULL, 0) : (void*)-1;
    if (p == (void*)-1) return 3;
  } else {
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
  }
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < len; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy(p + i, &x, 8);
  }
  const uint64_t want = sample(p, len, 4096), want_few = sample(p, len, 64 * 4096);
  int me = 0;
  for (int i = 1; i < n; ++i)
    if (fork() == 0) {
      me = i;
      break;
    }
  if (sysv && me) {  /* each child attaches by id itself (a new attach, not the inherited one) */
    shmdt(p);
    p = shmat(id, NULL, 0);
  }
  volatile uint64_t sink = 0;
  for (size_t i = 0; i < len; i += 64) sink += p[i];
  char path[4096];
  snprintf(path, sizeof path, "%s/ready-%d", dir, me);
  close(open(path, O_WRONLY | O_CREAT, 0600));
  snprintf(path, sizeof path, "%s/stop", dir);
  struct timespec ts = {0, 10 * 1000 * 1000};
  while (access(path, F_OK) != 0) nanosleep(&ts, NULL);
  /* The parent checks one byte of every page (what a cold read touches), the children one in 64: the
   * restart is measured, not four processes faulting in the same pages. */
  int ok = me ? sample(p, len, 64 * 4096) == want_few : sample(p, len, 4096) == want;
  printf("%s %d\n", ok ? "ok" : "BAD", me);
  if (me) return ok ? 0 : 1;
  int bad = !ok;
  for (int i = 1; i < n; ++i) {
    int st = 0;
    wait(&st);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  if (sysv) shmctl(id, IPC_RMID, NULL);
  return bad;
}
