// `revive restart`'s side of virtual pids (docs/process-trees.md "Virtual pids"): when the recorded pids
// cannot be recreated (no CAP_SYS_ADMIN/CAP_CHECKPOINT_RESTORE, clone3 refused, REVIVE_VPID=1), the tree
// is made with new pids and this table tells every restored process which kernel pid each recorded one
// now is. It is a shared file in /dev/shm (mode 0600) that `revive restart` maps before it forks, so the
// processes of the skeleton register themselves (tree_spawn.cpp); its path goes to them as
// REVIVE_VPID_TABLE, which revive-restart hands to the restored engine with the other REVIVE_* variables.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

std::string g_unlink_at_exit;

void unlink_table() {
  if (!g_unlink_at_exit.empty()) unlink(g_unlink_at_exit.c_str());
}

}  // namespace

bool WantVirtualPids() {
  const char* v = getenv("REVIVE_VPID");
  return v && strcmp(v, "1") == 0;
}

Status CreateVpidTable(VpidTable* out) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const uint64_t bytes = vpid::table_bytes(vpid::kCapacity);
  for (int attempt = 0; attempt < 16; ++attempt) {
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = uint64_t(getpid()) * 2654435761u + uint64_t(attempt);
    char name[128];
    snprintf(name, sizeof name, "%s/revive-vpid-%u-%016llx", dir, unsigned(getuid()), (unsigned long long)rnd);
    int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return Status::FromErrno(std::string("virtual-pid table ") + name, errno);
    if (ftruncate(fd, off_t(bytes)) != 0) {
      int e = errno;
      close(fd);
      unlink(name);
      return Status::FromErrno(std::string("virtual-pid table ") + name, e);
    }
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
      unlink(name);
      return Status::FromErrno(std::string("virtual-pid table ") + name, e);
    }
    vpid::Table::format(m, vpid::kCapacity);
    out->table.attach(m);
    out->path = name;
    // The computation's processes open it by path when they exec; it goes when `revive restart` ends
    // (its roots have ended).
    if (g_unlink_at_exit.empty()) atexit(unlink_table);
    g_unlink_at_exit = name;
    return Status::OK();
  }
  return Status::IOError(std::string("cannot create a virtual-pid table in ") + dir);
}

}  // namespace revive::proctree
