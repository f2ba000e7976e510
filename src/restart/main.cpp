// revive-restart [--lazy] IMAGE: rebuilds a process from a transparent checkpoint image and continues it.
//
// Address-space collisions: this program is a static PIE, so the kernel places it (and its stack) at
// random. If any of our mappings overlaps a region the image needs, we re-exec ourselves for a new random
// layout (up to 32 times) instead of relocating at run time: simple, and the odds of a clash are small.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coord/client.h"
#include "restart/restart.h"

using namespace revive;

namespace {

int usage() {
  fprintf(stderr, "usage: revive-restart [--lazy] IMAGE.rimg\n"
                  "  --lazy  map the image's pages instead of reading them (uncompressed images; the image file\n"
                  "          must stay in place while the program runs)\n");
  return 2;
}

}  // namespace

// The checkpoint signal (as the engine picks it, src/inject/init.cpp) stays blocked until the restored
// engine runs: one sent while we restore (a batch script's `kill -SIGRTMAX-2` right after the restart)
// would otherwise kill us by its default action. Blocked, it stays pending through our re-execs and is
// delivered to the restored engine's handler once the restored threads unblock it: a checkpoint then.
static void block_checkpoint_signal() {
  const char* v = getenv("REVIVE_SIGNAL");
  int sig = v ? atoi(v) : 0;
  if (sig < SIGRTMIN || sig > SIGRTMAX) sig = SIGRTMAX - 2;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

// Says why this image cannot be restored, to the user and to the restart's coordinator: the other
// processes of the restart wait for this one, and would wait forever (coord::report_restore_failure).
void sys_append_attempts(char* err, size_t cap, int attempt) {
  size_t n = strlen(err);
  snprintf(err + n, cap - n, " (still after %d re-executions)", attempt);
}

int restore_failed(const image::View& v, const char* image, const char* why) {
  fprintf(stderr, "revive-restart: image %s: %s\n", image, why);
  static char line[1400];
  snprintf(line, sizeof line, "%s (pid %llu) could not be restored from %s: %s", v.hdr->prog,
           (unsigned long long)v.hdr->pid, image, why);
  coord::report_restore_failure(v.hdr->upid, line);
  return 3;
}

int main(int argc, char** argv) {
  block_checkpoint_signal();
  bool lazy = false;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--lazy") == 0) lazy = true;
    else if (strcmp(argv[i], "--help") == 0 || argv[i][0] == '-') return usage();
    else if (!path) path = argv[i];
    else return usage();
  }
  if (!path) return usage();
  static char abs[PATH_MAX];
  if (!realpath(path, abs)) {
    fprintf(stderr, "revive-restart: image %s: %s\n", path, strerror(errno));
    return 2;
  }
  int fd = open(abs, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "revive-restart: image %s: %s\n", abs, strerror(errno));
    return 2;
  }
  if (!S_ISREG(st.st_mode)) {
    fprintf(stderr, "revive-restart: image %s: not a regular file\n", abs);
    return 2;
  }
  const uint8_t* base = nullptr;
  if (st.st_size > 0) {
    void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      fprintf(stderr, "revive-restart: image %s: mmap: %s\n", abs, strerror(errno));
      return 2;
    }
    base = static_cast<const uint8_t*>(m);
  }
  static char err[1024];
  image::View v;
  if (!image::open_view(abs, base, uint64_t(st.st_size), &v, err, sizeof err)) {
    fprintf(stderr, "revive-restart: %s\n", err);
    return 2;
  }
  restart::warm_up();  // allocations of ours happen now, before our layout is compared with the image's
  static restart::Range own[restart::kMaxOwn];
  long n = restart::read_own_maps(own, restart::kMaxOwn);
  if (n < 0) return restore_failed(v, abs, "cannot read /proc/self/maps");
  const char* a = getenv("REVIVE_RESTART_ATTEMPT");
  const int attempt = a ? atoi(a) : 0;
  // REVIVE_RESTART_FORCE_REEXEC=N pretends the first N layouts collide, so tests can cover this path.
  const char* force = getenv("REVIVE_RESTART_FORCE_REEXEC");
  if (force && attempt < atoi(force)) snprintf(err, sizeof err, "collision forced by REVIVE_RESTART_FORCE_REEXEC");
  if ((force && attempt < atoi(force)) || restart::collides(v, own, size_t(n), err, sizeof err)) {
    if (attempt >= 32) {
      sys_append_attempts(err, sizeof err, attempt);
      return restore_failed(v, abs, err);
    }
    char buf[16];
    snprintf(buf, sizeof buf, "%d", attempt + 1);
    setenv("REVIVE_RESTART_ATTEMPT", buf, 1);
    execv("/proc/self/exe", argv);
    snprintf(err, sizeof err, "re-exec failed: %s", strerror(errno));
    return restore_failed(v, abs, err);
  }
  if (attempt > 0 && getenv("REVIVE_LOG") && atoi(getenv("REVIVE_LOG")) >= 1)
    fprintf(stderr, "revive-restart: layout found after %d re-execution(s)\n", attempt);
  unsetenv("REVIVE_RESTART_ATTEMPT");
  unsetenv("REVIVE_RESTART_FORCE_REEXEC");
  if (!restart::move_specials(v, own, size_t(n), err, sizeof err)) return restore_failed(v, abs, err);
  // No time functions from here on: our libc's vdso pointers went stale with the move.
  if (!restart::restore_memory(v, abs, fd, lazy, err, sizeof err)) return restore_failed(v, abs, err);
  restart::restore_mm(v);
  close(fd);
  restart::hand_over(v, abs, lazy, err, sizeof err);
  return restore_failed(v, abs, err);
}
