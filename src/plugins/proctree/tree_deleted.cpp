// Deleted files several processes of a tree held (a temporary file unlinked, then inherited across fork):
// grouped by inode from the fd sections (PlanDeleted), recreated once by `revive restart` before the
// roots (MakeDeletedFiles), so that every holder's descriptions are opened on ONE inode again.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
    const FileRef* any = nullptr;
  };
  std::map<std::pair<uint32_t, int32_t>, Inode> inodes;
  for (size_t i = 0; i < plan->procs.size(); ++i)
    for (const FileRef& f : plan->procs[i].files) {
      if (!f.deleted) continue;
      Inode& n = inodes[f.inode];
      n.procs.insert(int(i));
      if (f.has_contents) n.stored = &f;
      n.any = &f;
    }
  std::map<std::pair<uint32_t, int32_t>, int> index;
  std::vector<std::pair<size_t, FileRef>> joined;  // mapping holders' shared descriptions (below)
  for (auto& [key, n] : inodes) {
    // Named after a descriptor of a process that maps the file shared (kStoredInShm): that mapped object
    // is the inode, handed down to these descriptors, which hold it without mapping it (issue 13).
    if (!n.stored) {
      for (size_t j = 0; j < plan->procs.size(); ++j) {
        const TreeProc& t = plan->procs[j];
        if (t.fd_pid != key.first) continue;
        for (const auto& [fd, at] : t.deleted_shm)
          if (fd == key.second) {
            index[key] = int(plan->deleted.size());
            DeletedFile d{n.any->path, n.any->mode, {}};
            d.shm_proc = int(j);
            d.shm_at = at;
            plan->deleted.push_back(std::move(d));
            // The mapping holder's descriptor was one description with the others' (inherited): it is
            // handed down as one too (same offset and flags), not reopened on the object apart.
            for (const FileRef& f : t.shm_files)
              if (f.fd == fd) joined.emplace_back(j, f);
          }
      }
      continue;
    }
    // One process: its fd plugin reopens its other descriptions through the one it recreates. No stored
    // contents (the image of the holder that stored them is not restarted): each holder's fd plugin
    // names the problem rather than make an empty file.
    if (n.procs.size() < 2) continue;
    index[key] = int(plan->deleted.size());
    plan->deleted.push_back(DeletedFile{n.stored->path, n.stored->mode, n.stored->contents});
  }
  for (auto& [j, f] : joined) plan->procs[j].files.push_back(std::move(f));  // n.any/n.stored no longer used
  for (TreeProc& t : plan->procs)
    for (FileRef& f : t.files)
      if (auto it = f.deleted ? index.find(f.inode) : index.end(); it != index.end()) {
        f.recreated = it->second;
        std::string().swap(f.contents);  // copied once, into plan->deleted
      }
}

void LinkDeletedShm(TreePlan* plan) {
  for (DeletedFile& f : plan->deleted) {
    if (f.shm_proc < 0) continue;
    for (size_t k = 0; k < plan->shm.size() && f.shm < 0; ++k)
      for (const ShmPiece& p : plan->shm[k].maps)
        if (p.proc == f.shm_proc && plan->procs[size_t(p.proc)].shm[p.index].start == f.shm_at) f.shm = int(k);
  }
}

Status MakeDeletedFiles(const TreePlan& plan, int base) {
  for (size_t d = 0; d < plan.deleted.size(); ++d) {
    const DeletedFile& f = plan.deleted[d];
    auto error = [&](const char* what) {
      return Status::IOError("cannot recreate deleted file '" + f.path + "' (held by several processes): " + what +
                             ": " + strerror(errno));
    };
    if (f.shm_proc >= 0) {
      // The object MakeShmObjects made for the mapping: the one inode the other holders open again.
      const int obj = f.shm >= 0 ? ShmObjectFd(size_t(f.shm)) : -1;
      if (obj < 0) {
        char at[24];
        snprintf(at, sizeof at, "%llx", (unsigned long long)f.shm_at);
        return Status::IOError("cannot hand deleted file '" + f.path + "' to its holders: " +
                               plan.procs[size_t(f.shm_proc)].image + " maps it shared at 0x" + at +
                               ", and that image has no such shared memory object");
      }
      if (dup3(obj, base + int(d), 0) < 0) return error("dup3");
      continue;
    }
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
