// Deleted files several processes of a tree held (a temporary file unlinked, then inherited across fork):
// grouped by inode from the fd sections (PlanDeleted), recreated once by `revive restart` before the
// roots (MakeDeletedFiles), so that every holder's descriptions are opened on ONE inode again.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <set>

#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

// The unlinked file for `path` ("<path> (deleted)" as the kernel named it): a memfd for a memfd, else
// O_TMPFILE in its old directory or /tmp, as the fd plugin recreates one of a single process.
int create_unlinked(const std::string& path, uint32_t mode) {
  std::string dir = path;
  const std::string suffix = " (deleted)";
  if (dir.size() >= suffix.size() && dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) == 0)
    dir.resize(dir.size() - suffix.size());
  if (dir.rfind("/memfd:", 0) == 0) return memfd_create(dir.c_str() + 7, MFD_CLOEXEC);
  size_t slash = dir.rfind('/');
  dir = slash == std::string::npos || slash == 0 ? "/" : dir.substr(0, slash);
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 07777);
  return fd >= 0 ? fd : open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 07777);
}

}  // namespace

void PlanDeleted(TreePlan* plan) {
  struct Inode {
    std::set<int> procs;
    const FileRef* stored = nullptr;
  };
  std::map<std::pair<uint32_t, int32_t>, Inode> inodes;
  for (size_t i = 0; i < plan->procs.size(); ++i)
    for (const FileRef& f : plan->procs[i].files) {
      if (!f.deleted) continue;
      Inode& n = inodes[f.inode];
      n.procs.insert(int(i));
      if (f.has_contents) n.stored = &f;
    }
  std::map<std::pair<uint32_t, int32_t>, int> index;
  for (auto& [key, n] : inodes) {
    // One process: its fd plugin reopens its other descriptions through the one it recreates. No stored
    // contents (the image of the holder that stored them is not restarted): each holder's fd plugin
    // names the problem rather than make an empty file.
    if (n.procs.size() < 2 || !n.stored) continue;
    index[key] = int(plan->deleted.size());
    plan->deleted.push_back(DeletedFile{n.stored->path, n.stored->mode, n.stored->contents});
  }
  for (TreeProc& t : plan->procs)
    for (FileRef& f : t.files)
      if (auto it = f.deleted ? index.find(f.inode) : index.end(); it != index.end()) {
        f.recreated = it->second;
        std::string().swap(f.contents);  // copied once, into plan->deleted
      }
}

Status MakeDeletedFiles(const TreePlan& plan, int base) {
  for (size_t d = 0; d < plan.deleted.size(); ++d) {
    const DeletedFile& f = plan.deleted[d];
    auto error = [&](const char* what) {
      return Status::IOError("cannot recreate deleted file '" + f.path + "' (held by several processes): " + what +
                             ": " + strerror(errno));
    };
    int fd = create_unlinked(f.path, f.mode);
    if (fd < 0) return error("O_TMPFILE");
    if (fd == base + int(d) && fcntl(fd, F_SETFD, 0) != 0) {
      Status s = error("F_SETFD");
      close(fd);
      return s;
    }
    for (size_t off = 0; off < f.contents.size();) {
      ssize_t w = write(fd, f.contents.data() + off, f.contents.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        if (w == 0) errno = EIO;
        Status s = error("write");
        close(fd);
        return s;
      }
      off += size_t(w);
    }
    // Not close-on-exec: inherited by the skeleton's processes, which open its descriptions through
    // /proc/self/fd/<base + d> and close it before they exec their restorers (tree_spawn.cpp).
    if (fd == base + int(d)) continue;
    if (dup3(fd, base + int(d), 0) < 0) {
      Status s = error("dup3");
      close(fd);
      return s;
    }
    close(fd);
  }
  return Status::OK();
}

}  // namespace revive::proctree
