// Reading the proctree sections of a generation's images and linking them into a tree.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "image/view.h"
#include "plugins/fd/fd_record.h"
#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

uint32_t U32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// The fd section's regular files, eventfds, timerfds, signalfds, epoll and inotify instances with their share keys, and the highest fd (fd_record.h). Best effort:
// a section this build cannot read leaves files empty (nothing shared; the fd plugin names the problem
// when it restores the image).
void ReadFiles(const image::View& v, TreeProc* out) {
  const image::SectionEntry* s = image::find_section(v, image::kKindPlugin, "fd");
  // Versions 2 to 5 share FdRecord's layout; they differ in what follows a socket's record (content_len
  // covers it either way) and in deleted files (kStoredInShm since 4; grouped by inode since 5).
  if (!s || s->version < 2 || s->version > plugins::kFdVersion) return;
  const uint8_t* p = v.base + s->offset;
  const uint64_t n = s->length;
  if (n < 12 || memcmp(p, plugins::kFdTag, 4) != 0) return;
  const uint32_t self = U32(p + 4);  // the pid share keys and DeletedHolders name this process by
  uint32_t count = U32(p + 8);
  uint64_t off = 12;
  std::vector<FileRef> files;
  int32_t max_fd = -1;
  for (uint32_t k = 0; k < count; ++k) {
    plugins::FdRecord rec;
    if (n - off < sizeof rec + 4) return;
    memcpy(&rec, p + off, sizeof rec);
    off += sizeof rec;
    uint32_t len = U32(p + off);
    off += 4;
    if (rec.content_len < 0 || n - off < len || n - off - len < uint64_t(rec.content_len)) return;
    std::string path(reinterpret_cast<const char*>(p + off), len);
    off += len;
    const uint8_t* content = p + off;
    off += uint64_t(rec.content_len);
    max_fd = std::max(max_fd, rec.fd);
    auto ref = [&](uint32_t key_pid, int32_t key_fd) {
      FileRef f;
      f.fd = rec.fd;
      f.key_pid = key_pid;
      f.key_fd = key_fd;
      f.flags = rec.flags;
      f.path = std::move(path);
      return f;
    };
    if (rec.kind == uint32_t(plugins::FdKind::kRegular) && rec.dup_of < 0 && rec.share_pid != 0 && rec.share_fd >= 0 &&
        path.rfind("/proc/", 0) != 0 && path.rfind("/sys/", 0) != 0)
      files.push_back(ref(rec.share_pid, rec.share_fd));
    if (rec.kind == uint32_t(plugins::FdKind::kEventfd) && rec.dup_of < 0 && rec.share_pid != 0 && rec.share_fd >= 0 &&
        rec.content_len == int64_t(sizeof(plugins::EventfdState))) {
      plugins::EventfdState st;
      memcpy(&st, content, sizeof st);
      FileRef f = ref(rec.share_pid, rec.share_fd);
      f.eventfd = true;
      f.efd_count = st.count;
      f.efd_semaphore = st.semaphore != 0;
      files.push_back(std::move(f));
    }
    if (rec.kind == uint32_t(plugins::FdKind::kTimerfd) && rec.dup_of < 0 && rec.share_pid != 0 && rec.share_fd >= 0 &&
        rec.content_len == int64_t(sizeof(plugins::TimerfdState))) {
      FileRef f = ref(rec.share_pid, rec.share_fd);
      f.timerfd = true;
      memcpy(&f.tfd, content, sizeof f.tfd);
      files.push_back(std::move(f));
    }
    if (rec.kind == uint32_t(plugins::FdKind::kSignalfd) && rec.dup_of < 0 && rec.share_pid != 0 && rec.share_fd >= 0 &&
        rec.content_len == int64_t(sizeof(uint64_t))) {
      FileRef f = ref(rec.share_pid, rec.share_fd);
      f.signalfd = true;
      memcpy(&f.sfd_mask, content, sizeof f.sfd_mask);
      files.push_back(std::move(f));
    }
    if (rec.kind == uint32_t(plugins::FdKind::kEpoll) && rec.dup_of < 0 && rec.share_pid != 0 && rec.share_fd >= 0) {
      FileRef f = ref(rec.share_pid, rec.share_fd);
      f.epoll = true;
      files.push_back(std::move(f));
    }
    if (rec.kind == uint32_t(plugins::FdKind::kInotify) && rec.dup_of < 0 && rec.share_pid != 0 && rec.share_fd >= 0) {
      FileRef f = ref(rec.share_pid, rec.share_fd);
      f.inotify = true;
      files.push_back(std::move(f));
    }
    if (rec.kind == uint32_t(plugins::FdKind::kDeleted) && rec.dup_of < 0 && s->version >= 5 &&
        rec.stored == plugins::kStoredInShm && rec.content_len == int64_t(sizeof(uint64_t))) {
      uint64_t at;
      memcpy(&at, content, sizeof at);
      out->deleted_shm.emplace_back(rec.fd, at);
      if (rec.share_pid != 0 && rec.share_fd >= 0) {
        FileRef f = ref(rec.share_pid, rec.share_fd);
        f.deleted = true;
        f.mode = rec.mode;
        f.inode = {self, rec.fd};
        out->shm_files.push_back(std::move(f));
      }
    }
    if (rec.kind == uint32_t(plugins::FdKind::kDeleted) && rec.dup_of < 0 && s->version >= 5 &&
        rec.stored != plugins::kStoredInShm) {
      const bool shared = rec.share_pid != 0 && rec.share_fd >= 0;
      FileRef f = shared ? ref(rec.share_pid, rec.share_fd) : ref(self, rec.fd);  // its own description unless shared
      f.deleted = true;
      f.mode = rec.mode;
      f.inode = {self, rec.fd};
      if (rec.stored == plugins::kStoredByHolder && rec.content_len == int64_t(sizeof(plugins::DeletedHolder))) {
        plugins::DeletedHolder h;
        memcpy(&h, content, sizeof h);
        f.inode = {h.pid, h.fd};
      } else if (rec.stored == plugins::kStoredHere) {
        f.has_contents = true;
        f.contents.assign(reinterpret_cast<const char*>(content), size_t(rec.content_len));
      }
      files.push_back(std::move(f));
    }
  }
  out->files = std::move(files);
  out->max_fd = max_fd;
  out->fd_pid = self;
}

// Groups the images' files by share key; a description held by two or more processes, or one of a deleted
// file the restart recreates (PlanDeleted), gets its owner: the lowest common ancestor of its holders in
// the plan (-1 when they are under different roots).
void PlanShared(TreePlan* plan) {
  PlanDeleted(plan);
  std::map<std::pair<uint32_t, int32_t>, SharedFile> groups;
  for (size_t i = 0; i < plan->procs.size(); ++i)
    for (const FileRef& f : plan->procs[i].files) {
      if (f.deleted && f.recreated < 0) continue;  // an inode of one process: its fd plugin recreates it
      SharedFile& g = groups[{f.key_pid, f.key_fd}];
      if (g.members.empty()) {
        g.path = f.path;
        g.flags = f.flags;
        g.deleted = f.recreated;
        g.eventfd = f.eventfd;
        g.efd_count = f.efd_count;
        g.efd_semaphore = f.efd_semaphore;
        g.timerfd = f.timerfd;
        g.tfd = f.tfd;
        g.signalfd = f.signalfd;
        g.sfd_mask = f.sfd_mask;
        g.epoll = f.epoll;
        g.inotify = f.inotify;
      }
      g.members.push_back({int(i), f.fd});
    }
  auto chain = [&](int i) {  // i and its ancestors, root last
    std::vector<int> c;
    for (; i >= 0; i = plan->procs[size_t(i)].parent) c.push_back(i);
    return c;
  };
  for (auto& [key, g] : groups) {
    if (g.members.size() < 2 && g.deleted < 0) continue;
    std::vector<int> common = chain(g.members[0].first);  // candidates, nearest first
    for (size_t m = 1; m < g.members.size(); ++m) {
      std::vector<int> c = chain(g.members[m].first);
      std::erase_if(common, [&](int x) { return std::find(c.begin(), c.end(), x) == c.end(); });
    }
    g.owner = common.empty() ? -1 : common.front();
    plan->shared.push_back(std::move(g));
  }
}

// One image's section, through the validating view (checksums of header, directory and sections).
Status ReadSection(const std::string& image, TreeProc* out) {
  int fd = open(image.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(image, errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return Status::Corruption(image + ": empty or unreadable image");
  }
  void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return Status::FromErrno(image + ": mmap", errno);
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{m, size_t(st.st_size)};
  image::View v;
  char err[512];
  if (!image::open_view(image.c_str(), static_cast<const uint8_t*>(m), uint64_t(st.st_size), &v, err, sizeof err))
    return Status::Corruption(err);
  const image::SectionEntry* s = image::find_section(v, image::kKindPlugin, "proctree");
  if (!s) return Status::NotFound(image + ": no proctree section");
  if (s->version != kVersion)
    return Status::InvalidArgument(image + ": proctree section version " + std::to_string(s->version) +
                                   ", this build reads " + std::to_string(kVersion));
  const uint8_t* p = v.base + s->offset;
  const uint64_t n = s->length;
  if (n < 24 || memcmp(p, kTag, 4) != 0) return Status::Corruption(image + ": proctree section: bad tag or too short");
  out->image = image;
  out->pid = U32(p + 4);
  out->ppid = U32(p + 8);
  out->pgid = U32(p + 12);
  out->sid = U32(p + 16);
  uint32_t nz = U32(p + 20);
  if (nz > kMaxZombies || n != 24 + uint64_t(nz) * 8)
    return Status::Corruption(image + ": proctree section: " + std::to_string(nz) + " zombies do not fit its " +
                              std::to_string(n) + " bytes");
  for (uint32_t i = 0; i < nz; ++i) out->zombies.push_back({U32(p + 24 + 8 * i), U32(p + 28 + 8 * i)});
  if (out->pid == 0) return Status::Corruption(image + ": proctree section: pid 0");
  for (uint32_t i = 0; i < v.thread_count; ++i)
    if (!v.threads[i].is_main && !v.threads[i].is_ckpt && v.threads[i].tid != out->pid)
      out->tids.push_back(uint32_t(v.threads[i].tid));
  ReadFiles(v, out);
  ReadShm(v, out);
  return Status::OK();
}

bool IsZombie(uint32_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return false;
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* close = strrchr(buf, ')');
  return close && close[1] == ' ' && close[2] == 'Z';
}

// `kind` id (a pid, or a thread's tid: kill() and /proc take either) in use by a running task: an error
// naming it, `what` it was, who holds it now, then `need` (what that stops; may be empty).
Status CheckIdFree(const char* kind, uint32_t id, const std::string& what, const char* need) {
  // A process killed with its tree may still be a zombie, until its new parent (init) reaps it.
  for (int i = 0; i < 300 && (kill(pid_t(id), 0) == 0 || errno == EPERM) && IsZombie(id); ++i) usleep(10000);
  if (kill(pid_t(id), 0) != 0 && errno != EPERM) return Status::OK();
  char comm[64] = "?";
  std::string path = "/proc/" + std::to_string(id) + "/comm";
  if (FILE* f = fopen(path.c_str(), "r")) {
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
  }
  return Status::InvalidArgument(std::string(kind) + " " + std::to_string(id) + " (" + what +
                                 ") is taken by a running process (" + comm + ")" + (*need ? "; " : "") + need);
}

}  // namespace

Status PlanTree(const std::vector<std::string>& images, TreePlan* plan) {
  plan->procs.assign(images.size(), TreeProc{});
  std::map<uint32_t, int> by_pid;
  for (size_t i = 0; i < images.size(); ++i) {
    Status s = ReadSection(images[i], &plan->procs[i]);
    if (!s.ok()) return s;
    auto [it, fresh] = by_pid.emplace(plan->procs[i].pid, int(i));
    if (!fresh)
      return Status::InvalidArgument(images[i] + " and " + images[size_t(it->second)] + " both record pid " +
                                     std::to_string(plan->procs[i].pid) + " (images of different machines or runs)");
  }
  for (size_t i = 0; i < plan->procs.size(); ++i) {
    TreeProc& t = plan->procs[i];
    auto it = by_pid.find(t.ppid);
    if (it == by_pid.end()) {
      plan->roots.push_back(int(i));
    } else {
      t.parent = it->second;
      plan->procs[size_t(it->second)].children.push_back(int(i));
    }
    for (const Zombie& z : t.zombies)
      if (by_pid.count(z.pid))
        return Status::InvalidArgument(t.image + " records pid " + std::to_string(z.pid) +
                                       " as an exited child, yet an image of that pid exists");
  }
  for (TreeProc& t : plan->procs)
    std::sort(t.children.begin(), t.children.end(),
              [&](int a, int b) { return plan->procs[size_t(a)].pid < plan->procs[size_t(b)].pid; });
  PlanShared(plan);
  PlanShm(plan);
  LinkDeletedShm(plan);
  return Status::OK();
}

bool NeedsTree(const TreePlan& plan) {
  for (const TreeProc& t : plan.procs)
    if (t.parent >= 0 || !t.zombies.empty()) return true;
  return false;
}

Status CheckPidsFree(const TreePlan& plan) {
  for (const TreeProc& t : plan.procs) {
    Status s = CheckIdFree("pid", t.pid, "process of " + t.image, "the tree must come back with its own pids");
    for (size_t z = 0; s.ok() && z < t.zombies.size(); ++z)
      s = CheckIdFree("pid", t.zombies[z].pid, "exited child recorded in " + t.image,
                      "the tree must come back with its own pids");
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status CheckTidsFree(const TreePlan& plan) {
  for (const TreeProc& t : plan.procs)
    for (uint32_t tid : t.tids) {
      Status s = CheckIdFree("tid", tid, "thread of " + t.image, "");
      if (!s.ok()) return s;
    }
  return Status::OK();
}

}  // namespace revive::proctree
