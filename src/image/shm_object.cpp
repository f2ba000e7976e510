#include "image/shm_object.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

namespace revive::image {
namespace {

bool write_next_id(int id) {
  int fd = open("/proc/sys/kernel/shm_next_id", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[16];
  int len = snprintf(buf, sizeof buf, "%d", id);
  bool ok = write(fd, buf, size_t(len)) == len;
  close(fd);
  return ok;
}

}  // namespace

uint64_t shm_size(const ShmRecord& s, uint64_t extent) {
  if (s.kind == kShmSysV && s.size) return s.size;  // IPC_STAT must report the size the program asked for
  if (s.kind == kShmTmpfsFile || s.kind == kShmDiskFile) return s.size;  // a mapping may reach past its end
  return s.size > extent ? s.size : extent;
}

int sysv_recreate(const ShmRecord& s, uint64_t size, char* note, size_t n) {
  note[0] = 0;
  const key_t key = key_t(s.sysv_key);
  struct shmid_ds ds;
  // The killed run's segment (a SysV segment outlives its processes unless it was marked for removal):
  // same id, same key, same size, nobody attached. Its bytes are put back to the checkpoint's.
  if (shmctl(s.sysv_id, IPC_STAT, &ds) == 0 && ds.shm_perm.__key == key && ds.shm_segsz == size &&
      ds.shm_nattch == 0)
    return s.sysv_id;
  if (key != IPC_PRIVATE) {
    int old = shmget(key, 0, 0);
    if (old >= 0 && shmctl(old, IPC_STAT, &ds) == 0 && ds.shm_nattch == 0) shmctl(old, IPC_RMID, nullptr);
  }
  const bool asked = write_next_id(s.sysv_id);
  const int mode = int(s.sysv_mode & 0777);
  int id = shmget(key, size, IPC_CREAT | IPC_EXCL | mode);
  if (id < 0 && asked) {  // the id is taken: any id
    write_next_id(-1);
    id = shmget(key, size, IPC_CREAT | IPC_EXCL | mode);
  }
  if (id < 0 && errno == EEXIST) {
    // The key belongs to a segment someone has attached (another run of the program?): ours gets none.
    snprintf(note, n, "SysV key 0x%x is held by an attached segment; the restored segment has no key",
             unsigned(key));
    id = shmget(IPC_PRIVATE, size, IPC_CREAT | mode);
  }
  if (id < 0) return -errno;
  if (id != s.sysv_id) {
    size_t used = strlen(note);
    snprintf(note + used, n - used, "%sSysV segment (key 0x%x) recreated with id %d instead of %d (%s); the "
             "program's shmctl() on the old id fails", used ? "; " : "", unsigned(key), id, s.sysv_id,
             asked ? "that id is taken" : "choosing SysV ids needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE");
  }
  return id;
}

bool zero_range(int fd, uint64_t off, uint64_t len) {
  if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(off), off_t(len)) == 0) return true;
  if (errno != EOPNOTSUPP && errno != ENOSYS) return false;
  static const char zeros[65536] = {};
  for (uint64_t done = 0; done < len;) {
    const size_t piece = len - done < sizeof zeros ? size_t(len - done) : sizeof zeros;
    ssize_t w = pwrite(fd, zeros, piece, off_t(off + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += uint64_t(w);
  }
  return true;
}

void set_mtime(int fd, int64_t mtime_ns) {
  if (mtime_ns <= 0) return;
  struct timespec ts[2] = {{0, UTIME_OMIT}, {mtime_ns / 1000000000, mtime_ns % 1000000000}};
  futimens(fd, ts);
}

int shm_file_open(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0 || errno != ENOENT) return fd >= 0 ? fd : -errno;
  char dir[4096];
  size_t n = strlen(path);
  if (n >= sizeof dir) return -ENAMETOOLONG;
  memcpy(dir, path, n + 1);
  for (char* p = dir + 1; *p; ++p) {  // each ancestor in turn; existing ones are fine
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  return fd >= 0 ? fd : -errno;
}

int memfd_recreate(const char* path, uint64_t size) {
  // "/memfd:NAME (deleted)" -> NAME, so /proc/PID/maps shows the same; others by their last component.
  char name[250];
  const char* p = path;
  if (strncmp(p, "/memfd:", 7) == 0) p += 7;
  else if (const char* slash = strrchr(p, '/')) p = slash + 1;
  else p = "revive-shm";
  size_t len = strlen(p);
  const char* del = " (deleted)";
  if (len >= strlen(del) && strcmp(p + len - strlen(del), del) == 0) len -= strlen(del);
  if (len >= sizeof name) len = sizeof name - 1;
  memcpy(name, p, len);
  name[len] = 0;
  if (!name[0] || strcmp(name, "zero") == 0) snprintf(name, sizeof name, "revive-shm");
  int fd = memfd_create(name, 0);
  if (fd < 0) return -errno;
  if (ftruncate(fd, off_t(size)) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

}  // namespace revive::image
