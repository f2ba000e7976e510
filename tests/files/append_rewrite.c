/* Files opened O_APPEND after the checkpoint, then changed other than by appending (tests/files/
 * preimage_test.py case append_rewrite). Each step appends a line to every file; then, once each:
 *   nap.txt   pwritev2(RWF_NOAPPEND) of a digest of the whole file at offset 10,
 *   map.txt   a MAP_SHARED|PROT_WRITE mapping of an O_RDWR|O_APPEND descriptor: a digest written at 100,
 *   mpr.txt   mapped MAP_SHARED read-only, the descriptor closed, then mprotect(PROT_WRITE) and the same,
 *   hole.txt  the digest of [4096, 8192) appended, then that range punched out (FALLOC_FL_PUNCH_HOLE),
 *   tru.txt   ftruncate of its O_APPEND descriptor to half its size, then its old digest appended,
 * while log.txt is only ever appended to; and spw.txt (not appended to) is truncated and rewritten with
 * its old digest by a posix_spawn'ed sh whose stdout is a file action (O_WRONLY|O_TRUNC), which glibc
 * opens in the child before its exec, where no wrapper runs. Each change depends on the bytes the file had, so a restart that
 * finds a file as the killed run left it (cut back to its checkpoint size, the rewritten bytes still there)
 * prints other digests than an uninterrupted run. On ctl/end it prints every file's digest and size.
 *
 * `append_rewrite probe FILE` checks what the files plugin relies on for not wrapping the other calls
 * (src/plugins/files/files_pre_wrap.cpp): on an O_APPEND descriptor pwrite at an offset appends,
 * copy_file_range into it fails (EBADF), sendfile and splice into it fail (EINVAL). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif

static void die(const char* what) {
  fprintf(stderr, "append_rewrite: %s: %s\n", what, strerror(errno));
  exit(2);
}

static uint64_t fnv(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Digest of `len` bytes at `off` of the file (len 0: to its end), as 16 hex digits. */
static void digest(const char* path, off_t off, size_t len, char out[17]) {
  static unsigned char buf[1 << 20];
  int fd = open(path, O_RDONLY);
  if (fd < 0) die(path);
  ssize_t n = pread(fd, buf, len ? len : sizeof buf, off);
  if (n < 0) die("pread");
  close(fd);
  snprintf(out, 17, "%016llx", (unsigned long long)fnv(buf, (size_t)n));
}

static void append_line(const char* path, int step) {
  int fd = open(path, O_WRONLY | O_APPEND);
  if (fd < 0) die(path);
  char b[64];
  int n = snprintf(b, sizeof b, "%s step %d\n", path, step);
  if (write(fd, b, n) != n) die("write");
  close(fd);
}

static void rewrite_nap(void) {
  char d[17];
  digest("nap.txt", 0, 0, d);
  int fd = open("nap.txt", O_WRONLY | O_APPEND);
  if (fd < 0) die("nap.txt");
  struct iovec v = {d, 16};
  if (pwritev2(fd, &v, 1, 10, RWF_NOAPPEND) != 16) die("pwritev2 RWF_NOAPPEND");
  close(fd);
}

static void rewrite_mapped(const char* path, int later) {
  char d[17];
  digest(path, 0, 0, d);
  int fd = open(path, O_RDWR | O_APPEND);
  if (fd < 0) die(path);
  struct stat st;
  if (fstat(fd, &st) != 0) die("fstat");
  char* m = mmap(NULL, st.st_size, later ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) die("mmap");
  close(fd);
  if (later && mprotect(m, st.st_size, PROT_READ | PROT_WRITE) != 0) die("mprotect");
  memcpy(m + 100, d, 16);
  if (msync(m, st.st_size, MS_SYNC) != 0) die("msync");
  munmap(m, st.st_size);
}

static void punch(void) {
  char d[17], line[64];
  digest("hole.txt", 4096, 4096, d);
  int fd = open("hole.txt", O_WRONLY | O_APPEND);
  if (fd < 0) die("hole.txt");
  int n = snprintf(line, sizeof line, "before the hole %s\n", d);
  if (write(fd, line, n) != n) die("write");
  if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096) != 0) die("fallocate PUNCH_HOLE");
  close(fd);
}

static void spawn_rewrite(void) {
  char d[17];
  digest("spw.txt", 0, 0, d);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "spw.txt", O_WRONLY | O_TRUNC, 0);
  char* av[] = {"sh", "-c", "printf 'spawned, was %s\\n' \"$0\"", d, NULL};
  pid_t c;
  int st;
  if (posix_spawn(&c, "/bin/sh", &fa, NULL, av, environ) != 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0)
    die("posix_spawn");
  posix_spawn_file_actions_destroy(&fa);
}

static int probe(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
  if (fd < 0) die(path);
  if (write(fd, "0123456789", 10) != 10 || pwrite(fd, "ab", 2, 0) != 2) die("pwrite");
  char b[16] = {0};
  if (pread(fd, b, sizeof b, 0) != 12 || memcmp(b, "0123456789ab", 12) != 0) {
    fprintf(stderr, "probe: pwrite at 0 on an O_APPEND descriptor did not append (%.12s)\n", b);
    return 1;
  }
  int src = open("/proc/self/exe", O_RDONLY);
  loff_t off = 0;
  errno = 0;
  if (copy_file_range(src, NULL, fd, &off, 4, 0) != -1 || errno != EBADF) {
    fprintf(stderr, "probe: copy_file_range into an O_APPEND file at an offset was not refused with EBADF (%s)\n", strerror(errno));
    return 1;
  }
  off_t so = 0;
  errno = 0;
  if (sendfile(fd, src, &so, 4) != -1 || errno != EINVAL) {
    fprintf(stderr, "probe: sendfile into an O_APPEND file was not refused with EINVAL (%s)\n", strerror(errno));
    return 1;
  }
  int p[2];
  if (pipe(p) != 0 || write(p[1], "wxyz", 4) != 4) die("pipe");
  errno = 0;
  loff_t po = 0;
  if (splice(p[0], NULL, fd, &po, 4, 0) != -1 || errno != EINVAL) {
    fprintf(stderr, "probe: splice into an O_APPEND file at an offset was not refused with EINVAL (%s)\n", strerror(errno));
    return 1;
  }
  errno = 0;
  if (splice(p[0], NULL, fd, NULL, 4, 0) != -1 || errno != EINVAL) {
    fprintf(stderr, "probe: splice into an O_APPEND file was not refused with EINVAL (%s)\n", strerror(errno));
    return 1;
  }
  close(src), close(fd), unlink(path);
  printf("probe: pwrite appends, copy_file_range/sendfile/splice refused on O_APPEND\n");
  return 0;
}

static void cut_half(void) {
  char d[17], line[64];
  digest("tru.txt", 0, 0, d);
  int fd = open("tru.txt", O_WRONLY | O_APPEND);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("tru.txt");
  if (ftruncate(fd, st.st_size / 2) != 0) die("ftruncate");
  int n = snprintf(line, sizeof line, "cut, was %s\n", d);
  if (write(fd, line, n) != n) die("write");
  close(fd);
}

static const char* const kFiles[] = {"log.txt", "nap.txt", "map.txt", "mpr.txt", "hole.txt", "tru.txt"};

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "probe") == 0) return probe(argv[2]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("ready\n");
  while (access("ctl/go", F_OK) != 0) usleep(10000);
  for (int step = 0; step < 60; ++step) {
    for (size_t k = 0; k < sizeof kFiles / sizeof *kFiles; ++k) append_line(kFiles[k], step);
    if (step == 4) rewrite_nap();
    if (step == 8) rewrite_mapped("map.txt", 0);
    if (step == 12) rewrite_mapped("mpr.txt", 1);
    if (step == 16) punch();
    if (step == 20) spawn_rewrite();
    if (step == 22) cut_half();
    printf("step %d\n", step);
    usleep(20000);
  }
  while (access("ctl/end", F_OK) != 0) usleep(10000);
  for (size_t k = 0; k <= sizeof kFiles / sizeof *kFiles; ++k) {
    const char* f = k < sizeof kFiles / sizeof *kFiles ? kFiles[k] : "spw.txt";
    char d[17];
    struct stat st;
    digest(f, 0, 0, d);
    if (stat(f, &st) != 0) die(f);
    printf("%s %s %lld\n", f, d, (long long)st.st_size);
  }
  return 0;
}
