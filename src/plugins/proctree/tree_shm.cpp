// Shared memory objects of a restarted tree (docs/image-format.md "Shared memory"): each object the
// images map (shared anonymous, SysV, memfd, deleted file, file on tmpfs) is created once, here in
// `revive restart` before the roots are forked, filled with the bytes of checkpoint time (each mapped range
// is stored once, in whichever image claimed it), and handed to every restorer that maps it
// (REVIVE_SHM, read by src/restart/memory.cpp). Creating it here, not in the first restorer, leaves no
// order among the restorers to get wrong: a /dev/shm file is reset once, before anyone maps it.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zstd.h>

#include "image/shm_object.h"
#include "image/view.h"
#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

struct Handle {
  char kind = 0;  // 'F' an fd, 'S' a SysV id
  int val = -1;
  bool keep_attached = false;  // SysV marked for removal: attached here as long as we live
  void* attach = nullptr;
};
std::vector<Handle> g_handles;  // parallel to plan.shm

// An image mapped read-only with its validated view.
struct Mapped {
  void* p = MAP_FAILED;
  size_t n = 0;
  image::View v;
  ~Mapped() {
    if (p != MAP_FAILED) munmap(p, n);
  }
};

Status OpenImage(const std::string& path, Mapped* m) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return Status::FromErrno(path, e);
  }
  m->n = size_t(st.st_size);
  m->p = mmap(nullptr, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m->p == MAP_FAILED) return Status::FromErrno(path + ": mmap", errno);
  char err[512];
  if (!image::open_view(path.c_str(), static_cast<const uint8_t*>(m->p), m->n, &m->v, err, sizeof err))
    return Status::Corruption(err);
  return Status::OK();
}

// Reads [off, off + len) of the image straight into dst with O_DIRECT (as revive-restart does: through
// the page cache, every page costs a host fault more on a VM that hands freed memory back); false where
// the filesystem refuses it.
bool ReadDirect(int fd, uint8_t* dst, uint64_t len, uint64_t off) {
  if (fd < 0 || (len | off | reinterpret_cast<uintptr_t>(dst)) & 4095) return false;
  for (uint64_t done = 0; done < len;) {
    ssize_t got = pread(fd, dst + done, len - done, off_t(off + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += uint64_t(got);
  }
  return true;
}

// Copies region `reg`'s chunks of image `m` into `dst` (the object's bytes from the region's offset).
Status CopyChunks(const std::string& name, const Mapped& m, uint32_t reg, uint8_t* dst) {
  const image::RegionRecord& r = m.v.regions[reg];
  int direct = open(name.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  struct Closer {
    int& fd;
    ~Closer() {
      if (fd >= 0) close(fd);
    }
  } closer{direct};
  for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count; ++c) {
    const image::ChunkRecord& k = m.v.chunks[c];
    const uint8_t* src = m.v.base + k.file_offset;
    uint8_t* at = dst + (k.addr - r.start);
    if (k.stored_len == k.len && ReadDirect(direct, at, k.len, k.file_offset)) {
      if (XXH3_64bits(at, k.len) != k.xxh3)
        return Status::Corruption(name + ": data chunk " + std::to_string(c) + " checksum mismatch");
      continue;
    }
    if (XXH3_64bits(src, k.stored_len) != k.xxh3)
      return Status::Corruption(name + ": data chunk " + std::to_string(c) + " checksum mismatch");
    if (k.stored_len == k.len) {
      memcpy(at, src, k.len);
    } else {
      size_t got = ZSTD_decompress(at, k.len, src, k.stored_len);
      if (ZSTD_isError(got) || got != k.len)
        return Status::Corruption(name + ": compressed chunk " + std::to_string(c) + " does not decompress");
    }
  }
  return Status::OK();
}

std::string Describe(const ShmObject& o) {
  char buf[96];
  snprintf(buf, sizeof buf, " (dev %llx inode %llu)", (unsigned long long)o.rec.dev, (unsigned long long)o.rec.ino);
  return "shared memory " + o.path + buf;
}

// The shm mappings of the generation's images that are not in the plan (the images beside the plan's
// first one), read once.
const std::vector<std::pair<std::string, std::vector<ShmMap>>>& OtherImages(const TreePlan& plan) {
  static std::vector<std::pair<std::string, std::vector<ShmMap>>> others;
  static bool read = false;
  if (read || plan.procs.empty()) return others;
  read = true;
  const std::string& first = plan.procs[0].image;
  const std::string dir = first.substr(0, first.find_last_of('/') + 1);
  std::set<std::string> ours;
  for (const TreeProc& t : plan.procs) ours.insert(t.image);
  DIR* d = opendir(dir.empty() ? "." : dir.c_str());
  for (dirent* e = d ? readdir(d) : nullptr; e; e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".rimg") != 0 || ours.count(dir + name)) continue;
    Mapped m;
    if (!OpenImage(dir + name, &m).ok()) continue;  // not ours to judge: its own restart reports it
    TreeProc t;
    ReadShm(m.v, &t);
    if (!t.shm.empty()) others.emplace_back(dir + name, std::move(t.shm));
  }
  if (d) closedir(d);
  return others;
}

Status MakeOne(const TreePlan& plan, const ShmObject& o, int fd_floor, Handle* h) {
  const uint64_t size = image::shm_size(o.rec, o.extent);
  int got;
  if (o.rec.kind == image::kShmSysV) {
    char note[400];
    got = image::sysv_recreate(o.rec, size, note, sizeof note);
    if (note[0]) fprintf(stderr, "revive restart: warning: %s\n", note);
    h->kind = 'S';
  } else if (o.rec.kind == image::kShmTmpfsFile || o.rec.kind == image::kShmDiskFile) {
    // The file itself (it is the object other programs find by name), back to its checkpoint contents:
    // every mapped range was stored by some image, and pages no image holds were zero.
    got = image::shm_file_open(o.path.c_str());
    if (got < 0) errno = -got;
    struct stat st;
    if (got >= 0 && fstat(got, &st) == 0 && uint64_t(st.st_size) < size && ftruncate(got, off_t(size)) != 0) {
      close(got);
      got = -1;
    }
    for (const ShmPiece& p : o.maps) {
      const ShmMap& mp = plan.procs[size_t(p.proc)].shm[p.index];
      if (got >= 0 && !image::zero_range(got, mp.file_offset, mp.len)) {
        int e = errno;
        close(got);
        return Status::FromErrno("resetting " + Describe(o), e);
      }
    }
    if (got < 0) got = -errno;
    h->kind = 'F';
  } else {
    got = image::memfd_recreate(o.path.c_str(), size);
    h->kind = 'F';
  }
  if (got < 0) return Status::FromErrno("recreating " + Describe(o), -got);
  if (h->kind == 'F') {
    // Above every descriptor a restorer keeps (the images' own, the shared descriptions handed down).
    int high = fcntl(got, F_DUPFD, fd_floor);
    close(got);
    if (high < 0) return Status::FromErrno("recreating " + Describe(o) + ": no descriptor", errno);
    got = high;
  }
  h->val = got;
  // The bytes, from the images that stored them.
  uint8_t* base = nullptr;
  if (h->kind == 'S') {
    void* a = shmat(got, nullptr, 0);
    if (a == reinterpret_cast<void*>(-1)) return Status::FromErrno("attaching " + Describe(o), errno);
    h->attach = a;
    base = static_cast<uint8_t*>(a);
  }
  auto fill = [&](const std::string& image, uint32_t region, uint64_t off, uint64_t len) -> Status {
    Mapped m;
    Status s = OpenImage(image, &m);
    if (!s.ok()) return s;
    if (region >= m.v.region_count) return Status::Corruption(image + ": changed while restarting");
    if (h->kind == 'S') {
      if (off + len > (size + 4095) / 4096 * 4096)
        return Status::Corruption(image + ": " + Describe(o) + " mapped beyond the segment");
      return CopyChunks(image, m, region, base + off);
    }
    void* w = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, got, off_t(off));
    if (w == MAP_FAILED) return Status::FromErrno("filling " + Describe(o), errno);
    s = CopyChunks(image, m, region, static_cast<uint8_t*>(w));
    munmap(w, len);
    return s;
  };
  std::set<std::pair<uint64_t, uint64_t>> filled;  // (offset, length) of the ranges put back
  for (const ShmPiece& p : o.bytes) {
    const TreeProc& t = plan.procs[size_t(p.proc)];
    const ShmMap& mp = t.shm[p.index];
    Status s = fill(t.image, mp.region, mp.file_offset, mp.len);
    if (!s.ok()) return s;
    filled.insert({mp.file_offset, mp.len});
  }
  // A range whose bytes an image outside this plan stored (`revive restart --hosts` placed the process
  // that claimed it on another host): from that image, which lies beside ours.
  for (const ShmPiece& p : o.maps) {
    const ShmMap& mp = plan.procs[size_t(p.proc)].shm[p.index];
    if (filled.count({mp.file_offset, mp.len})) continue;
    for (const auto& [image, maps] : OtherImages(plan)) {
      auto it = std::find_if(maps.begin(), maps.end(), [&](const ShmMap& x) {
        return x.has_bytes && x.rec.host == o.rec.host && x.rec.dev == o.rec.dev && x.rec.ino == o.rec.ino &&
               x.file_offset == mp.file_offset && x.len == mp.len;
      });
      if (it == maps.end()) continue;
      Status s = fill(image, it->region, mp.file_offset, mp.len);
      if (!s.ok()) return s;
      filled.insert({mp.file_offset, mp.len});
      break;
    }
    if (!filled.count({mp.file_offset, mp.len}))
      fprintf(stderr, "revive restart: warning: %s: no image holds the bytes of its range at offset %llu (%llu "
              "bytes); it starts zeroed\n", Describe(o).c_str(), (unsigned long long)mp.file_offset,
              (unsigned long long)mp.len);
  }
  // A file's mtime as at the checkpoint: a restored private mapping of it checks it.
  if (h->kind == 'F' && !o.maps.empty())
    image::set_mtime(got, plan.procs[size_t(o.maps[0].proc)].shm[o.maps[0].index].mtime_ns);
  if (h->kind == 'S') {
    // Marked for removal at the checkpoint: marked again now. A marked segment disappears when its last
    // attach goes, so ours stays until every restorer has attached it (by id, which Linux allows for a
    // marked segment). We cannot tell when the last one has, so `revive restart` (or the pid
    // namespace's init) keeps it until it exits: one attach more than the program made, in shm_nattch.
    if (o.rec.flags & image::kShmSysvDest) {
      shmctl(got, IPC_RMID, nullptr);
      h->keep_attached = true;
    } else {
      shmdt(h->attach);
      h->attach = nullptr;
    }
  }
  return Status::OK();
}

}  // namespace

void ReadShm(const image::View& v, TreeProc* out) {
  for (uint32_t k = 0; k < v.shm_count; ++k) {
    const image::ShmRecord& s = v.shm[k];
    const image::RegionRecord& r = v.regions[s.region];
    const int64_t mtime = (r.flags & image::kRegFile) ? r.file_mtime_ns : 0;
    out->shm.push_back(ShmMap{s, s.region, r.file_offset, r.end - r.start, r.start, r.chunk_count > 0, mtime, r.path});
  }
}

void PlanShm(TreePlan* plan) {
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, size_t> index;
  for (size_t i = 0; i < plan->procs.size(); ++i)
    for (size_t k = 0; k < plan->procs[i].shm.size(); ++k) {
      const ShmMap& m = plan->procs[i].shm[k];
      auto [it, fresh] = index.emplace(std::make_tuple(m.rec.host, m.rec.dev, m.rec.ino), plan->shm.size());
      if (fresh) {
        ShmObject o;
        o.rec = m.rec;
        o.path = m.path;
        plan->shm.push_back(std::move(o));
      }
      ShmObject& o = plan->shm[it->second];
      o.extent = std::max(o.extent, m.file_offset + m.len);
      o.maps.push_back({int(i), k});
      if (!(m.rec.flags & image::kShmBytesElsewhere)) o.bytes.push_back({int(i), k});
    }
}

Status MakeShmObjects(const TreePlan& plan, int fd_floor) {
  // A spawn taken again (a pid was taken meanwhile: retried in a pid namespace) starts from nothing: an
  // attach kept by the first attempt would keep its segment's id from being reused.
  CloseShm(true);
  g_handles.assign(plan.shm.size(), Handle{});
  for (size_t k = 0; k < plan.shm.size(); ++k) {
    Status s = MakeOne(plan, plan.shm[k], fd_floor, &g_handles[k]);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

void HandShm(const TreePlan& plan, size_t i) {
  std::string env;
  for (size_t k = 0; k < plan.shm.size() && k < g_handles.size(); ++k) {
    const Handle& h = g_handles[k];
    bool used = false;
    for (const ShmPiece& p : plan.shm[k].maps)
      if (p.proc == int(i) && h.kind) {
        env += (env.empty() ? "" : ",") + std::to_string(plan.procs[i].shm[p.index].region) + ":" + h.kind +
               std::to_string(h.val);
        used = true;
      }
    if (h.kind == 'F' && !used) close(h.val);
    if (h.attach) shmdt(h.attach);  // the restorer attaches by id; ours (inherited) would count as one more
  }
  if (env.empty()) unsetenv("REVIVE_SHM");
  else setenv("REVIVE_SHM", env.c_str(), 1);
}

int ShmObjectFd(size_t k) {
  return k < g_handles.size() && g_handles[k].kind == 'F' ? g_handles[k].val : -1;
}

void CloseShm(bool detach) {
  for (Handle& h : g_handles) {
    if (h.kind == 'F' && h.val >= 0) close(h.val), h.val = -1;
    if (h.attach && detach) shmdt(h.attach), h.attach = nullptr;
  }
}

}  // namespace revive::proctree
