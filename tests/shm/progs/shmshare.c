/* A parent and its child take turns incrementing a counter in memory they share (docs/image-format.md
 * "Shared memory"): whose turn it is lives in that memory too, so if a restart hands each process a
 * private copy, neither ever sees its turn again and both report the loss after 10 s. Each round also
 * writes a page of a 1 MiB area, whose sum the parent prints at the end (contents of checkpoint time).
 * MODE says how the memory is shared:
 *   anon       mmap(MAP_SHARED|MAP_ANONYMOUS) before fork
 *   sysv       shmget with a key; the child detaches what it inherited and attaches by key itself; every
 *              round the parent checks shmctl(IPC_STAT) on its id; shmdt and IPC_RMID at the end
 *   sysv_rmid  the same, marked IPC_RMID as soon as both are attached (key then private)
 *   memfd      memfd_create, mapped before fork
 *   posix      shm_open in /dev/shm, mapped by each process after the fork (two mappings of one file)
 *   deleted    a file in the cwd mapped by both, then unlinked (deleted but mapped)
 *   deleted_fd the same, and the parent keeps the file open: every turn it reads the counter through the
 *              descriptor too, which must be the mapped object, not a copy (UCX's posix transport lets
 *              peers open a segment through /proc/PID/fd/N)
 *   file       a file in the cwd (on disk) mapped by each process after the fork, kept
 * Output: stdout, line buffered; one line per turn. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AREA (1 << 20)
struct shared {
  volatile long turn; /* 0 parent, 1 child */
  volatile long counter;
  unsigned char pad[4096 - 2 * sizeof(long)];
  unsigned char data[AREA];
};
#define SIZE sizeof(struct shared)

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static const char* mode;
static key_t key;
static int shmid = -1;
static char name[128];
static int keep_fd = -1; /* deleted_fd: the parent's descriptor of the mapped file */

static int is_file_mode(void) {
  return strcmp(mode, "posix") == 0 || strcmp(mode, "deleted") == 0 || strcmp(mode, "deleted_fd") == 0 ||
         strcmp(mode, "file") == 0;
}

static struct shared* attach_key(void) {
  int id = shmget(key, 0, 0);
  void* p = id >= 0 ? shmat(id, NULL, 0) : (void*)-1;
  if (p == (void*)-1) {
    printf("shmget/shmat by key failed: %s\n", strerror(errno));
    exit(90);
  }
  return p;
}

static struct shared* map_fd_path(const char* path, int posix) {
  int fd = posix ? shm_open(path, O_RDWR, 0) : open(path, O_RDWR);
  void* p = fd >= 0 ? mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (p == MAP_FAILED) {
    printf("mapping %s failed: %s\n", path, strerror(errno));
    exit(91);
  }
  close(fd);
  return p;
}

static struct shared* create(void) {
  void* p = MAP_FAILED;
  if (strcmp(mode, "anon") == 0) {
    p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  } else if (strncmp(mode, "sysv", 4) == 0) {
    /* A key of this run (the cwd and our pid, both the same after a restart), so runs side by side differ. */
    char cwd[512];
    unsigned h = 2166136261u;
    if (getcwd(cwd, sizeof cwd))
      for (char* c = cwd; *c; ++c) h = (h ^ (unsigned char)*c) * 16777619u;
    key = (key_t)(((h ^ (unsigned)getpid()) & 0x00ffffff) | 0x52000000);
    while ((shmid = shmget(key, SIZE, IPC_CREAT | IPC_EXCL | 0600)) < 0 && errno == EEXIST) key++;
    if (shmid >= 0) p = shmat(shmid, NULL, 0);
    if (p == (void*)-1) p = MAP_FAILED;
  } else if (strcmp(mode, "memfd") == 0) {
    int fd = memfd_create("shmshare", 0);
    if (fd >= 0 && ftruncate(fd, SIZE) == 0) p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  } else if (is_file_mode()) {
    int posix = mode[0] == 'p';
    if (posix) snprintf(name, sizeof name, "/revive-shmshare-%d", (int)getpid());
    else snprintf(name, sizeof name, "%s.bin", mode);
    int fd = posix ? shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600) : open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0 && ftruncate(fd, SIZE) == 0) p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (strcmp(mode, "deleted_fd") == 0) keep_fd = fd;
    else close(fd);
  }
  if (p == MAP_FAILED) {
    printf("cannot create the shared memory (%s): %s\n", mode, strerror(errno));
    exit(92);
  }
  return p;
}

/* Waits for our turn; false after 10 s (the other process does not share our memory any more). */
static int wait_turn(struct shared* s, long mine) {
  for (int i = 0; i < 10000; ++i) {
    if (s->turn == mine) return 1;
    nap(1);
  }
  return 0;
}

static int play(struct shared* s, long mine, int rounds, const char* who) {
  for (int i = 0; i < rounds; ++i) {
    if (!wait_turn(s, mine)) {
      printf("%s: sharing lost at round %d (counter %ld)\n", who, i, s->counter);
      return 1;
    }
    long c = ++s->counter;
    s->data[((size_t)c * 4096 + (size_t)i) % AREA] = (unsigned char)(c * 7 + mine);
    if (mine == 0 && shmid >= 0) {
      struct shmid_ds ds;
      if (shmctl(shmid, IPC_STAT, &ds) != 0) printf("parent: shmctl(IPC_STAT) failed: %s\n", strerror(errno));
      else if (ds.shm_segsz != SIZE) printf("parent: segment size %zu\n", (size_t)ds.shm_segsz);
      else if (strcmp(mode, "sysv") == 0 && ds.shm_perm.__key != key) printf("parent: key changed\n");
    }
    if (mine == 0 && keep_fd >= 0) {
      long via_fd = -1;
      if (pread(keep_fd, &via_fd, sizeof via_fd, offsetof(struct shared, counter)) != sizeof via_fd || via_fd != c)
        printf("parent: the descriptor reads counter %ld, the mapping %ld\n", via_fd, c);
    }
    printf("%s %d counter %ld\n", who, i, c);
    nap(6);
    s->turn = !mine;
  }
  return 0;
}

int main(int argc, char** argv) {
  mode = argc > 1 ? argv[1] : "anon";
  int rounds = argc > 2 ? atoi(argv[2]) : 200;
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct shared* s = create();
  s->turn = 0;
  s->counter = 0;
  pid_t child = fork();
  if (child < 0) return 99;
  if (child == 0) {
    if (shmid >= 0) { /* attach by key, at an address of its own */
      shmdt(s);
      s = attach_key();
    } else if (is_file_mode()) {
      if (keep_fd >= 0) close(keep_fd);
      keep_fd = -1;
      munmap(s, SIZE);
      s = map_fd_path(name, mode[0] == 'p');
    }
    s->data[AREA - 1] = 1; /* attached: the parent may go on */
    int r = play(s, 1, rounds, "child");
    if (shmid >= 0) printf("child: shmdt %s\n", shmdt(s) == 0 ? "ok" : strerror(errno));
    return r ? 1 : 5;
  }
  while (!s->data[AREA - 1]) nap(1);
  if (strcmp(mode, "sysv_rmid") == 0 && shmctl(shmid, IPC_RMID, NULL) != 0) printf("IPC_RMID failed\n");
  if (strncmp(mode, "deleted", 7) == 0) unlink(name);
  int r = play(s, 0, rounds, "parent");
  if (!r && !wait_turn(s, 0)) printf("parent: the child's last turn never came\n");
  int st = 0;
  waitpid(child, &st, 0);
  unsigned long sum = 0;
  for (size_t i = 0; i < AREA; ++i) sum = sum * 31 + s->data[i];
  printf("parent: child exit %d, counter %ld, sum %lu\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, s->counter, sum);
  if (shmid >= 0) {
    printf("parent: shmdt %s\n", shmdt(s) == 0 ? "ok" : strerror(errno));
    if (strcmp(mode, "sysv") == 0) shmctl(shmid, IPC_RMID, NULL);
  }
  if (strcmp(mode, "posix") == 0) shm_unlink(name);
  return r ? 1 : 0;
}
