// Rebuilding the address space: each saved region is mapped at its own address (MAP_FIXED_NOREPLACE:
// the collision check ran before, so a clash here is a bug worth a message, never a silent overwrite),
// file-backed regions from their files, then the saved bytes go back on top.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/shm_object.h"
#include "restart/restart.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zstd.h>

namespace revive::restart {
namespace {

ZSTD_DCtx* g_dctx;
// The image opened a second time with O_DIRECT, or -1: data chunks are read with it straight into the
// restored pages. A buffered read first fills page cache, which on a VM that hands freed memory back to
// its host costs a host fault per page on top of the restored page's own; reading 1 GiB cold into fresh
// memory took 3.1-4.9 s buffered and 0.3-0.7 s with O_DIRECT here. Chunks are page aligned in the file
// and in memory, as O_DIRECT needs; where it is refused (tmpfs, some FUSE) the buffered fd is used.
int g_direct_fd = -1;
constexpr uint64_t kPiece = uint64_t{8} << 20;

bool fail(char* err, size_t n, const image::RegionRecord& r, const char* what, int e) {
  snprintf(err, n, "region %llx-%llx %s: %s%s%s", (unsigned long long)r.start, (unsigned long long)r.end,
           r.path[0] ? r.path : "(anonymous)", what, e ? ": " : "", e ? strerror(e) : "");
  return false;
}

// Shared memory objects (format.h ShmRecord). Under `revive restart` the tree's skeleton created and
// filled each object once and hands it down: REVIVE_SHM="REGION:Ffd,..." (a memfd or the tmpfs file) or
// "REGION:Sshmid" (a SysV segment), REGION being the index of this image's region. Every process then
// maps the one object, so what one writes the others see, as before the checkpoint; the bytes are in
// already. A lone `revive-restart IMAGE` gets nothing handed down and makes its image's objects itself
// (one per object even when the process maps it several times), filled from its own chunks.
constexpr uint32_t kMaxShm = 4096;
struct ShmHand {
  uint32_t region;
  char kind;  // 'F' fd, 'S' shmid
  int val;
};
ShmHand g_hand[kMaxShm];
uint32_t g_nhand;
struct LocalObj {
  uint64_t host, dev, ino;
  char kind;
  int val;
  int64_t mtime_ns;  // a file's, set back once it is filled (0: not a file)
};
LocalObj g_local[kMaxShm];
uint32_t g_nlocal;
struct Attach {  // SysV attaches made here: later regions of the same attach need no mapping
  uint64_t start, end;
};
Attach g_attach[kMaxShm];
uint32_t g_nattach;
bool g_warned_elsewhere;
MappedObject g_mapped[kMaxShm];
uint32_t g_nmapped;

void read_shm_env() {
  const char* v = getenv("REVIVE_SHM");
  for (const char* p = v; p && *p;) {
    char* end = nullptr;
    unsigned long reg = strtoul(p, &end, 10);
    const bool good = end != p && *end == ':' && (end[1] == 'F' || end[1] == 'S') && g_nhand < kMaxShm;
    char kind = good ? end[1] : 0;
    long val = good ? strtol(end + 2, &end, 10) : -1;
    if (!good || val < 0 || val > INT32_MAX || (*end && *end != ',')) {
      fprintf(stderr, "revive-restart: ignoring malformed REVIVE_SHM '%s'\n", v);
      g_nhand = 0;
      break;
    }
    g_hand[g_nhand++] = ShmHand{uint32_t(reg), kind, int(val)};
    p = *end ? end + 1 : end;
  }
  unsetenv("REVIVE_SHM");  // not part of the restored engine's REVIVE_* environment
}

}  // namespace

const MappedObject* mapped_objects(uint32_t* n) {
  *n = g_nmapped;
  return g_mapped;
}

namespace {

void close_shm_fds() {
  for (uint32_t i = 0; i < g_nhand; ++i)
    if (g_hand[i].kind == 'F') close(g_hand[i].val);
  for (uint32_t i = 0; i < g_nlocal; ++i)
    if (g_local[i].kind == 'F') {
      image::set_mtime(g_local[i].val, g_local[i].mtime_ns);
      close(g_local[i].val);
    }
  g_nhand = g_nlocal = 0;
}

// This image's own object for record s (lone restart): made on first use, then the same one.
bool local_object(const image::View& v, const image::RegionRecord& r, const image::ShmRecord& s, char* kind,
                  int* val, char* err, size_t n) {
  for (uint32_t i = 0; i < g_nlocal; ++i)
    if (g_local[i].host == s.host && g_local[i].dev == s.dev && g_local[i].ino == s.ino) {
      *kind = g_local[i].kind;
      *val = g_local[i].val;
      return true;
    }
  if (g_nlocal == kMaxShm) return fail(err, n, r, "too many shared memory objects", 0);
  uint64_t extent = 0;
  for (uint32_t k = 0; k < v.shm_count; ++k) {
    const image::ShmRecord& o = v.shm[k];
    const image::RegionRecord& q = v.regions[o.region];
    if (o.host == s.host && o.dev == s.dev && o.ino == s.ino && q.file_offset + (q.end - q.start) > extent)
      extent = q.file_offset + (q.end - q.start);
  }
  const uint64_t size = image::shm_size(s, extent);
  int got;
  if (s.kind == image::kShmSysV) {
    char note[400];
    got = image::sysv_recreate(s, size, note, sizeof note);
    if (note[0]) fprintf(stderr, "revive-restart: warning: %s\n", note);
    *kind = 'S';
  } else if (s.kind == image::kShmTmpfsFile || s.kind == image::kShmDiskFile) {
    got = image::shm_file_open(r.path);
    struct stat st;
    if (got >= 0 && fstat(got, &st) == 0 && uint64_t(st.st_size) < size) (void)!ftruncate(got, off_t(size));
    *kind = 'F';
  } else {
    got = image::memfd_recreate(r.path, size);
    *kind = 'F';
  }
  if (got < 0) return fail(err, n, r, "cannot recreate the shared memory object", -got);
  *val = got;
  const bool file = r.flags & image::kRegFile;
  g_local[g_nlocal++] = LocalObj{s.host, s.dev, s.ino, *kind, got, file ? r.file_mtime_ns : 0};
  return true;
}

// Maps region i, a shared memory object's mapping. *filled: the bytes are in already (handed down).
bool map_shm(const image::View& v, uint32_t i, const image::ShmRecord& s, bool* filled, char* err, size_t n) {
  const image::RegionRecord& r = v.regions[i];
  char kind = 0;
  int val = -1;
  for (uint32_t k = 0; k < g_nhand && !kind; ++k)
    if (g_hand[k].region == i) kind = g_hand[k].kind, val = g_hand[k].val;
  *filled = kind != 0;
  if (!kind) {
    if (!local_object(v, r, s, &kind, &val, err, n)) return false;
    if ((s.flags & image::kShmBytesElsewhere) && !g_warned_elsewhere) {
      g_warned_elsewhere = true;
      fprintf(stderr, "revive-restart: warning: region %llx-%llx %s: another process of the checkpoint stored "
              "this shared memory's bytes; restarted alone it starts zeroed (restart the whole checkpoint "
              "with `revive restart`)\n", (unsigned long long)r.start, (unsigned long long)r.end, r.path);
    }
  }
  const uint64_t len = r.end - r.start;
  if (kind == 'S') {
    for (uint32_t k = 0; k < g_nattach; ++k)
      if (g_attach[k].start <= r.start && r.end <= g_attach[k].end) return true;  // part of an attach
    if (r.file_offset != 0 || g_nattach == kMaxShm)
      return fail(err, n, r, "a SysV segment mapped from another offset than its start cannot be attached", 0);
    struct shmid_ds ds;
    const uint64_t seg = shmctl(val, IPC_STAT, &ds) == 0 ? (ds.shm_segsz + 4095) / 4096 * 4096 : len;
    // Read-only (SHM_RDONLY) when no part of the attach was writable and nothing is to be written here:
    // the segment's mode may allow no more.
    bool writable = !*filled;
    for (uint32_t k = i; k < v.region_count && v.regions[k].start < r.start + seg; ++k)
      writable = writable || (v.regions[k].prot & PROT_WRITE);
    void* got = shmat(val, reinterpret_cast<void*>(r.start), writable ? 0 : SHM_RDONLY);
    if (got != reinterpret_cast<void*>(r.start)) return fail(err, n, r, "shmat failed", errno);
    g_attach[g_nattach++] = Attach{r.start, r.start + seg};
    // Marked for removal at the checkpoint: again, now that we hold it (it goes with its last process).
    if (!*filled && (s.flags & image::kShmSysvDest)) shmctl(val, IPC_RMID, nullptr);
    return true;
  }
  // A tmpfs file restored here: the range back to the checkpoint's state first (what the killed run
  // wrote afterwards must not survive; pages the image does not hold were zero).
  if (!*filled && (s.kind == image::kShmTmpfsFile || s.kind == image::kShmDiskFile) &&
      !(s.flags & image::kShmBytesElsewhere) && !image::zero_range(val, r.file_offset, len))
    return fail(err, n, r, "cannot reset the shared memory file", errno);
  void* want = reinterpret_cast<void*>(r.start);
  void* got = mmap(want, len, int(r.prot) | PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, val,
                   off_t(r.file_offset));
  if (got != want) return fail(err, n, r, "mmap of the shared memory object failed", got == MAP_FAILED ? errno : EEXIST);
  if (r.file_offset == 0 && g_nmapped < kMaxShm) {  // for the fd plugin (a kStoredInShm record names the start)
    int keep = fcntl(val, F_DUPFD_CLOEXEC, 0);
    if (keep >= 0) g_mapped[g_nmapped++] = MappedObject{r.start, r.end, keep};
  }
  return true;
}

bool map_region(const image::RegionRecord& r, char* err, size_t n) {
  const uint64_t len = r.end - r.start;
  const bool shared = r.flags & image::kRegShared;
  int prot = int(r.prot) | PROT_READ | PROT_WRITE;  // writable while the bytes go back
  void* want = reinterpret_cast<void*>(r.start);
  void* got;
  if (r.flags & image::kRegFile) {
    int fd = open(r.path, (shared && (r.prot & PROT_WRITE)) ? O_RDWR : O_RDONLY);
    if (fd < 0) return fail(err, n, r, "cannot open the mapped file", errno);
    struct stat st;
    fstat(fd, &st);
    int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (!shared && (st.st_ino != r.ino || uint64_t(st.st_size) != r.file_size || mtime != r.file_mtime_ns)) {
      close(fd);
      return fail(err, n, r, "file changed since the checkpoint (inode, size or mtime differ)", 0);
    }
    if (shared) prot = int(r.prot) | ((r.flags & image::kRegSavedAll) ? PROT_WRITE : 0);
    // Shared memory whose bytes the image holds (/dev/shm): back to the checkpoint's state, i.e. pages
    // the image does not hold are zero again, whatever the killed process wrote after the checkpoint.
    if (shared && (r.flags & image::kRegSavedAll) &&
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(r.file_offset), off_t(len)) != 0) {
      int e = errno;
      close(fd);
      return fail(err, n, r, "cannot reset the shared memory file", e);
    }
    got = mmap(want, len, prot, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED_NOREPLACE, fd, off_t(r.file_offset));
    int e = errno;
    close(fd);
    if (got != want) return fail(err, n, r, "mmap of the file failed", got == MAP_FAILED ? e : EEXIST);
    return true;
  }
  int flags = (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
  if (r.flags & image::kRegGrowsDown) flags |= MAP_GROWSDOWN;
  got = mmap(want, len, prot, flags, -1, 0);
  if (got != want) return fail(err, n, r, "mmap failed", got == MAP_FAILED ? errno : EEXIST);
  return true;
}

// A chunk whose bytes the readers bring in (the others are mapped lazily or decompressed here).
bool read_kind(const image::RegionRecord& r, const image::ChunkRecord& k, bool lazy) {
  const bool map_it = lazy && !(r.flags & (image::kRegShared | image::kRegGrowsDown));
  return k.stored_len == k.len && !map_it;
}

uint64_t pieces_of(const image::ChunkRecord& k) { return (k.len + kPiece - 1) / kPiece; }

// Regions whose bytes this process puts back: not special, not a shared object handed down filled.
bool to_fill(const image::View& v, uint32_t i) {
  if (v.regions[i].flags & image::kRegSpecial) return false;
  if (!image::shm_of(v, i)) return true;
  for (uint32_t k = 0; k < g_nhand; ++k)
    if (g_hand[k].region == i) return false;
  return true;
}

// Region r's chunks in order. Chunks the readers bring in take their pieces from *next on (the order
// the list was built in), each checksummed here as it arrives; lazy ones are mapped, compressed ones
// decompressed from the image mapping.
bool fill_region(const image::View& v, const image::RegionRecord& r, const char* name, int fd, bool lazy,
                 uint32_t* next, char* err, size_t n) {
  for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count; ++c) {
    const image::ChunkRecord& k = v.chunks[c];
    void* at = reinterpret_cast<void*>(k.addr);
    if (read_kind(r, k, lazy)) {
      XXH3_state_t st;
      XXH3_64bits_reset(&st);
      for (uint64_t done = 0; done < k.len; done += kPiece) {
        const int e = reader_wait((*next)++);
        if (e) return fail(err, n, r, "reading the image failed", e);
        XXH3_64bits_update(&st, static_cast<char*>(at) + done, k.len - done < kPiece ? k.len - done : kPiece);
      }
      if (XXH3_64bits_digest(&st) != k.xxh3) {
        char what[160];
        snprintf(what, sizeof what, "data chunk %u (%llu bytes at image offset %llu) checksum mismatch in %s", c,
                 (unsigned long long)k.len, (unsigned long long)k.file_offset, name);
        return fail(err, n, r, what, 0);
      }
      continue;
    }
    if (k.stored_len == k.len) {  // lazy: page runs become private mappings of the image (demand paging)
      void* got = mmap(at, k.len, int(r.prot) | PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
                       off_t(k.file_offset));
      if (got != at) return fail(err, n, r, "lazy mapping of the image failed", errno);
      continue;
    }
    // A zstd frame (compressed images only; the view checked the flag).
    const uint8_t* src = v.base + k.file_offset;
    if (XXH3_64bits(src, k.stored_len) != k.xxh3) {
      char what[160];
      snprintf(what, sizeof what, "compressed chunk %u (at image offset %llu) checksum mismatch in %s", c,
               (unsigned long long)k.file_offset, name);
      return fail(err, n, r, what, 0);
    }
    size_t got = g_dctx ? ZSTD_decompressDCtx(g_dctx, at, k.len, src, k.stored_len) : 0;
    if (!g_dctx || ZSTD_isError(got) || got != k.len) {
      char what[200];
      snprintf(what, sizeof what, "compressed chunk %u in %s does not decompress to %llu bytes (%s)", c, name,
               (unsigned long long)k.len, g_dctx && ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size");
      return fail(err, n, r, what, 0);
    }
  }
  return true;
}

// Every region's bytes: the pieces list, the readers, then region by region in order.
bool fill_all(const image::View& v, const char* name, int fd, bool lazy, char* err, size_t n) {
  uint64_t count = 0;
  for (uint32_t i = 0; i < v.region_count; ++i) {
    if (!to_fill(v, i)) continue;
    const image::RegionRecord& r = v.regions[i];
    for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count; ++c)
      if (read_kind(r, v.chunks[c], lazy)) count += pieces_of(v.chunks[c]);
  }
  if (count > UINT32_MAX / 2) {
    snprintf(err, n, "image %s: too many data pieces (%llu)", name, (unsigned long long)count);
    return false;
  }
  // Mapped, not malloc'ed: our heap must not grow (restart.h); every region is in place already, so the
  // kernel cannot put this where the image needs to be.
  const size_t list_len = size_t(count) * (sizeof(Piece) + sizeof(int)) + 1;
  void* list = mmap(nullptr, list_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (list == MAP_FAILED) {
    snprintf(err, n, "image %s: cannot map the list of %llu pieces: %s", name, (unsigned long long)count,
             strerror(errno));
    return false;
  }
  Piece* pieces = static_cast<Piece*>(list);
  int* state = reinterpret_cast<int*>(pieces + count);
  uint32_t k = 0;
  for (uint32_t i = 0; i < v.region_count; ++i) {
    if (!to_fill(v, i)) continue;
    const image::RegionRecord& r = v.regions[i];
    for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count; ++c) {
      const image::ChunkRecord& ch = v.chunks[c];
      if (!read_kind(r, ch, lazy)) continue;
      for (uint64_t done = 0; done < ch.len; done += kPiece)
        pieces[k++] = Piece{reinterpret_cast<char*>(ch.addr) + done, ch.len - done < kPiece ? ch.len - done : kPiece,
                            ch.file_offset + done};
    }
  }
  reader_start(fd, g_direct_fd, pieces, state, k, reader_count());
  uint32_t next = 0;
  bool ok = true;
  for (uint32_t i = 0; i < v.region_count && ok; ++i)
    if (to_fill(v, i)) ok = fill_region(v, v.regions[i], name, fd, lazy, &next, err, n);
  reader_finish();
  munmap(list, list_len);
  return ok;
}

}  // namespace

void warm_up() { g_dctx = ZSTD_createDCtx(); }

bool restore_memory(const image::View& v, const char* name, int fd, bool lazy, char* err, size_t n) {
  // REVIVE_RESTART_NO_DIRECT=1: buffered reads only (tests of that path, and a way out should a
  // filesystem accept O_DIRECT but serve it badly).
  const char* nd = getenv("REVIVE_RESTART_NO_DIRECT");
  if (!lazy && !(nd && *nd == '1')) g_direct_fd = open(name, O_RDONLY | O_DIRECT | O_CLOEXEC);
  read_shm_env();
  // Every region is mapped before any byte is read: the readers' threads and the pieces list then get
  // addresses the image cannot need.
  for (uint32_t i = 0; i < v.region_count; ++i) {
    const image::RegionRecord& r = v.regions[i];
    if (r.flags & image::kRegSpecial) continue;
    const image::ShmRecord* s = image::shm_of(v, i);
    bool filled = false;
    if (s ? !map_shm(v, i, *s, &filled, err, n) : !map_region(r, err, n)) return false;
  }
  if (!fill_all(v, name, fd, lazy, err, n)) return false;
  for (uint32_t i = 0; i < v.region_count; ++i) {
    const image::RegionRecord& r = v.regions[i];
    if (r.flags & image::kRegSpecial) continue;
    if (mprotect(reinterpret_cast<void*>(r.start), r.end - r.start, int(r.prot)) != 0)
      return fail(err, n, r, "mprotect failed", errno);
  }
  close_shm_fds();  // the mappings hold the objects
  if (g_direct_fd >= 0) close(g_direct_fd);
  g_direct_fd = -1;
  return true;
}

uint8_t g_mm_map[kMmMapMax];
uint32_t g_mm_map_len;

void restore_mm(const image::View& v) {
  static_assert(sizeof(struct prctl_mm_map) <= kMmMapMax);
  const image::ProcessInfo* pi = v.process;
  struct prctl_mm_map m;
  memset(&m, 0, sizeof m);
  m.start_code = pi->start_code;
  m.end_code = pi->end_code;
  m.start_data = pi->start_data;
  m.end_data = pi->end_data;
  m.start_brk = pi->start_brk;
  m.brk = pi->brk;
  m.start_stack = pi->start_stack;
  m.arg_start = pi->arg_start;
  m.arg_end = pi->arg_end;
  m.env_start = pi->env_start;
  m.env_end = pi->env_end;
  // /proc/self/exe cannot be replaced here: the kernel refuses while this restarter (the current exe) is
  // mapped. The fd plugin does it later with this same map and exe_fd (g_mm_map, handover.cpp).
  m.exe_fd = uint32_t(-1);
  // PR_SET_MM_MAP needs no capability (unlike the single-field PR_SET_MM_* calls, CAP_SYS_RESOURCE) but
  // needs CONFIG_CHECKPOINT_RESTORE. Where it fails the kernel keeps our own brk: glibc's sbrk then fails
  // (the old heap is in the way) and malloc falls back to mmap, slower but correct.
  // REVIVE_RESTART_NO_MM=1 skips it, so tests can exercise that fallback on this kernel.
  const char* skip = getenv("REVIVE_RESTART_NO_MM");
  errno = ENOSYS;
  if ((skip && *skip == '1') || prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof m, 0) != 0) {
    if (getenv("REVIVE_LOG") && atoi(getenv("REVIVE_LOG")) >= 1)
      fprintf(stderr, "revive-restart: PR_SET_MM_MAP failed (%s); malloc will use mmap instead of brk\n",
              strerror(errno));
    return;
  }
  memcpy(g_mm_map, &m, sizeof m);
  g_mm_map_len = sizeof m;
}

}  // namespace revive::restart
