/* One process maps one memfd twice (a ring buffer's trick: the second view right after the first) and
 * a SysV segment twice: what it writes through one view it must read through the other. Restarted alone
 * (`revive-restart IMAGE`, no tree, nothing handed down), each object must come back once, mapped at both
 * addresses. Prints one line per round; a view that stopped sharing prints a mismatch. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <time.h>
#include <unistd.h>

#define LEN (64 * 4096)

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fd = memfd_create("ring", 0);
  if (fd < 0 || ftruncate(fd, LEN) != 0) return 2;
  char* a = mmap(NULL, 2 * LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED) return 3;
  if (mmap(a, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != a ||
      mmap(a + LEN, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != a + LEN)
    return 4;
  close(fd);
  int id = shmget(IPC_PRIVATE, LEN, IPC_CREAT | 0600);
  volatile long* s1 = id >= 0 ? shmat(id, NULL, 0) : (void*)-1;
  volatile long* s2 = id >= 0 ? shmat(id, NULL, 0) : (void*)-1;
  if (s1 == (void*)-1 || s2 == (void*)-1) return 5;
  shmctl(id, IPC_RMID, NULL); /* goes with the process */
  struct timespec ts = {0, 10 * 1000 * 1000};
  for (int i = 0; i < rounds; ++i) {
    volatile long* r1 = (volatile long*)(a + (size_t)(i % 64) * 4096);
    volatile long* r2 = (volatile long*)(a + LEN + (size_t)(i % 64) * 4096);
    *r1 += i;
    s1[i % 512] += i;
    printf("round %d ring %ld sysv %ld%s\n", i, *r2, s2[i % 512], *r1 == *r2 && s1[i % 512] == s2[i % 512] ? "" : " MISMATCH");
    nanosleep(&ts, NULL);
  }
  return 0;
}
