// Two processes take turns in a critical section guarded by a file lock (flock, POSIX fcntl or OFD),
// each adding 1 to a counter file STEPS times, holding the lock ~2 ms while a marker file names the
// holder (another file). A lock lost across a checkpoint or a restart lets both in at once: the marker shows it
// ("VIOLATION", exit 1) and the counter loses updates. Output: the final count.
// The lock file is opened write-only: saving its contents (the files plugin) opens and closes another
// description of it, which by POSIX rules drops the process's fcntl locks on it unless taken again.
//   locks flock|posix|ofd STEPS
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* mode;

static void die(const char* what) {
  perror(what);
  exit(2);
}

static void lock(int fd, int on) {
  if (strcmp(mode, "flock") == 0) {
    while (flock(fd, on ? LOCK_EX : LOCK_UN) != 0)
      if (errno != EINTR) die("flock");
    return;
  }
  struct flock fl = {.l_type = on ? F_WRLCK : F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  int cmd = strcmp(mode, "posix") == 0 ? F_SETLKW : F_OFD_SETLKW;
  while (fcntl(fd, cmd, &fl) != 0)
    if (errno != EINTR) die("fcntl lock");
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void run(const char* who, int steps) {
  int lf = open("lockfile", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);  // a description of its own
  int cf = open("counter", O_RDWR | O_CLOEXEC);
  int hf = open("holder", O_RDWR | O_CREAT | O_CLOEXEC, 0644);  // who is in the critical section
  if (lf < 0 || cf < 0 || hf < 0) die("open");
  for (int i = 0; i < steps; ++i) {
    lock(lf, 1);
    if (pwrite(lf, who, 1, 0) != 1 || pwrite(hf, who, 1, 0) != 1) die("mark");
    char buf[32] = {0};
    if (pread(cf, buf, sizeof buf - 1, 0) < 0) die("read counter");
    long v = atol(buf);
    nap_us(2000);
    char mark = 0;
    if (pread(hf, &mark, 1, 0) != 1) die("read mark");
    if (mark != who[0]) {
      printf("VIOLATION: %s found %c in the critical section at step %d\n", who, mark, i);
      exit(1);
    }
    int n = snprintf(buf, sizeof buf, "%ld\n", v + 1);
    if (pwrite(cf, buf, (size_t)n, 0) != n) die("write counter");
    lock(lf, 0);
    nap_us(300);
  }
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  mode = argv[1];
  int steps = atoi(argv[2]);
  int cf = open("counter", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (cf < 0 || write(cf, "0\n", 2) != 2) die("counter");
  close(cf);
  pid_t child = fork();
  if (child < 0) die("fork");
  run(child == 0 ? "c" : "p", steps);
  if (child == 0) return 0;
  int st;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("child failed\n");
    return 1;
  }
  FILE* f = fopen("counter", "r");
  long v = -1;
  if (!f || fscanf(f, "%ld", &v) != 1) die("final read");
  printf("final %ld (want %d)\n", v, 2 * steps);
  return v == 2 * steps ? 0 : 1;
}
