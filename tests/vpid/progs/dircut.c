// Listings of /proc and /proc/self/task begun before a checkpoint and finished after a restart with
// virtual pids (tests/vpid/dircut.py). glibc reads a directory into the DIR's buffer in one getdents64
// and hands entries out one by one: the first entries of /proc are its fixed names, the pids come
// after, so here the pids of the old incarnation are all in hand (in the buffer) when the checkpoint is
// taken. The rest of the listing must still show the program's ids: this process and its child in
// /proc, both threads in /proc/self/task, and none of the old incarnation's kernel ids.
//
// With MODE (argv[2]) holding 'l' the listings are opened at launch (no virtual-pid table yet), begun,
// checkpointed there and, after the restart with virtual pids, rewound (rewinddir: read from the kernel
// again, whose ids are now the new incarnation's) and read whole; with 'r' every entry is read with
// readdir_r, with 'f' the listings are made with open + fdopendir (tests/vpid/dircut_launch.py).
//
// Gates: the driver creates DIR/A, DIR/B when this program may go on. The numeric entries listed go to
// DIR/listed ("proc N" / "task N" lines) for the driver's own check.
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "own_child.h"  // gate()

static int g_tpipe[2];
static volatile pid_t g_tid;

static void* idle_thread(void* arg) {
  (void)arg;
  g_tid = (pid_t)syscall(SYS_gettid);
  char c;
  while (read(g_tpipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return NULL;
}

static int numeric(const char* s) {
  if (!*s) return 0;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

// Reads up to `max` entries of d (all when max < 0); numeric ones are written to `out` with `tag`.
// Sets *seen_a / *seen_b when a or b is listed. Returns the count read, -1 on error.
static int g_use_r;  // readdir_r instead of readdir

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static struct dirent* next_entry(DIR* d) {
  if (!g_use_r) return readdir(d);
  static struct dirent entry;
  struct dirent* r = NULL;
  int err = readdir_r(d, &entry, &r);
  if (err) errno = err;
  return r;
}
#pragma GCC diagnostic pop

static int take(DIR* d, int max, FILE* out, const char* tag, pid_t a, pid_t b, int* seen_a, int* seen_b) {
  int n = 0;
  for (; max < 0 || n < max; ++n) {
    errno = 0;
    struct dirent* e = next_entry(d);
    if (!e) return errno ? -1 : n;
    if (!numeric(e->d_name)) continue;
    long v = atol(e->d_name);
    fprintf(out, "%s %ld\n", tag, v);
    if (v == a) *seen_a = 1;
    if (v == b) *seen_b = 1;
  }
  return n;
}

// opendir, or (mode 'f') open + fdopendir, as find's fts and Python's os.listdir(fd) do.
static DIR* open_dir(const char* path, int use_fd) {
  if (!use_fd) return opendir(path);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? NULL : fdopendir(fd);
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: dircut GATE_DIR [MODE]\n");
    return 2;
  }
  g_dir = argv[1];
  const int at_launch = argc == 3 && strchr(argv[2], 'l') != NULL;
  g_use_r = argc == 3 && strchr(argv[2], 'r') != NULL;
  const int use_fd = argc == 3 && strchr(argv[2], 'f') != NULL;
  setvbuf(stdout, NULL, _IONBF, 0);
  printf("started\n");
  if (!at_launch) gate("A");  // meanwhile: a checkpoint, every process killed, a restart with virtual pids
  int cp[2];
  if (pipe(cp) != 0 || pipe(g_tpipe) != 0) return 3;
  pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    close(cp[1]);
    char c;
    while (read(cp[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  close(cp[0]);
  pthread_t t;
  if (pthread_create(&t, NULL, idle_thread, NULL) != 0) return 3;
  while (!g_tid) usleep(1000);
  char path[4096];
  snprintf(path, sizeof path, "%s/listed", g_dir);
  FILE* out = fopen(path, "w");
  DIR* proc = open_dir("/proc", use_fd);
  DIR* task = open_dir("/proc/self/task", use_fd);
  if (!out || !proc || !task) return 4;
  const pid_t self = getpid(), tid = g_tid;
  int self_seen = 0, child_seen = 0, main_seen = 0, thread_seen = 0;
  // The first entries: "." and ".." (the whole directory is in the DIR's buffer from here on).
  if (take(proc, 2, out, "proc", self, child, &self_seen, &child_seen) != 2 ||
      take(task, 1, out, "task", self, tid, &main_seen, &thread_seen) != 1)
    return 5;
  printf("listing begun\n");
  gate("B");  // meanwhile: a checkpoint, every process killed, a restart with virtual pids
  if (at_launch) {
    rewinddir(proc);
    rewinddir(task);
  }
  if (take(proc, -1, out, "proc", self, child, &self_seen, &child_seen) < 0 ||
      take(task, -1, out, "task", self, tid, &main_seen, &thread_seen) < 0)
    return 6;
  fclose(out);
  closedir(proc);
  closedir(task);
  int bad = 0;
  if (self_seen && child_seen) {
    printf("/proc lists this process and its child\n");
  } else {
    printf("/proc LACKS%s%s\n", self_seen ? "" : " this process", child_seen ? "" : " its child");
    bad = 1;
  }
  if (main_seen && thread_seen) {
    printf("/proc/self/task lists both threads\n");
  } else {
    printf("/proc/self/task LACKS%s%s\n", main_seen ? "" : " the main thread", thread_seen ? "" : " the other");
    bad = 1;
  }
  close(cp[1]);
  close(g_tpipe[1]);
  int st = 0;
  if (waitpid(child, &st, 0) != child || st != 0) bad = 1;
  pthread_join(t, NULL);
  return bad;
}
