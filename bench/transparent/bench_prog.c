/* Workloads for bench/transparent (run by bench.py):
 *   hold MB random|compressible  fill MB of heap, print "ready" on stderr, then idle-compute until killed
 *   rawwrite MB random|compressible PATH  the physical limit: write+fsync of the same bytes from memory
 *   compute N   a pure compute loop, prints its seconds (runtime overhead)
 *   syscall N   N cheap system calls plus N small writes to /dev/null, prints its seconds
 *   syscall-idle-thread N   the same with one extra pthread that only sleeps (native: is the engine's
 *               syscall overhead simply "the process has a second thread"?) */
#define _GNU_SOURCE  /* sync_file_range */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* idle_thread(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static uint64_t* fill(size_t mb, int random) {
  size_t n = mb << 17;
  uint64_t* a = malloc(n * 8);
  if (!a) exit(90);
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    /* compressible: small numbers in a repeating text-like pattern (zstd gets ~5-10x) */
    a[i] = random ? s : 0x2020202030313233ull + (i % 64) + ((s & 3) << 40);
  }
  return a;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (!strcmp(argv[1], "hold") || !strcmp(argv[1], "rawwrite")) {
    size_t mb = (size_t)atol(argv[2]);
    int random = argc > 3 && !strcmp(argv[3], "random");
    uint64_t* a = fill(mb, random);
    if (!strcmp(argv[1], "rawwrite")) {
      int fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0600);
      double t0 = now();
      size_t left = mb << 20, off = 0, started = 0, dropped = 0;
      const char* p = (const char*)a;
      /* Streamed like the engine writes images (src/inject/writer.cpp): writeback started every 8 MiB,
       * the window before waited for and dropped from the page cache. On this VM a fresh page-cache
       * page costs a host fault, so a plain write of GBs into new page cache measures that, not the disk. */
      while (left) {
        size_t k = left < (8u << 20) ? left : (8u << 20);
        ssize_t w = write(fd, p, k);
        if (w <= 0) return 91;
        p += w, left -= (size_t)w, off += (size_t)w;
        if (off - started >= (8u << 20)) {
          sync_file_range(fd, (off_t)started, (off_t)(off - started), SYNC_FILE_RANGE_WRITE);
          if (started > dropped) {
            sync_file_range(fd, (off_t)dropped, (off_t)(started - dropped),
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
            posix_fadvise(fd, (off_t)dropped, (off_t)(started - dropped), POSIX_FADV_DONTNEED);
            dropped = started;
          }
          started = off;
        }
      }
      fsync(fd);
      close(fd);
      printf("%.6f\n", now() - t0);
      unlink(argv[4]);
      return 0;
    }
    fprintf(stderr, "ready\n");
    volatile uint64_t h = 0;
    for (;;) {
      for (int k = 0; k < 1000000; ++k) h += a[k & 1023];
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  long n = atol(argv[2]);
  if (!strcmp(argv[1], "syscall-idle-thread")) {
    pthread_t t;
    if (pthread_create(&t, NULL, idle_thread, NULL) != 0) return 93;
  }
  double t0 = now();
  if (!strcmp(argv[1], "compute")) {
    volatile uint64_t h = 1469598103934665603ull;
    for (long i = 0; i < n; ++i) h = (h ^ (uint64_t)i) * 1099511628211ull;
  } else {
    int fd = open("/dev/null", O_WRONLY);
    char c = 'x';
    for (long i = 0; i < n; ++i) {
      syscall(SYS_getppid);
      if (write(fd, &c, 1) != 1) return 92;
    }
    close(fd);
  }
  printf("%.6f\n", now() - t0);
  return 0;
}
