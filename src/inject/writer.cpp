// Image writer. Page runs go to the file with one write() each, straight from process memory (no
// staging copy); only pages that hold data are stored: pagemap says which are populated (and, for
// private file mappings, which were modified), and populated pages that are all zero are dropped.
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/utsname.h>
#include <time.h>

#include "inject/engine.h"
#include "inject/plugin.h"
#include "inject/sys.h"
#include "plugins/vpid/vpid.h"

#define XXH_INLINE_ALL  // header-only: nothing to link into the preloaded library
#include <xxhash.h>

namespace revive::inject {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kChunkMax = 8u << 20;  // checksum granularity and write size
// Regions up to this size are compressed even when compression is off (Config::compress_small): the
// bytes of an MPI rank beyond its data (heap, libraries' .data and RELRO, stacks, the MPI library's own
// shared segments: 3-11 MB per rank, bench/mpi) compress 4-20x at zstd level 1, in a few ms; a large
// region is the program's data, which the disk writes faster than zstd compresses it
// (docs/performance.md). 8 MiB, not 4: UCX's shared segments are 4.1 MiB each.
constexpr uint64_t kSmallRegion = 8u << 20;
constexpr uint64_t kPmPresent = 1ull << 63, kPmSwap = 1ull << 62, kPmFile = 1ull << 61;

struct Out {
  int fd;
  uint64_t off;
  long err;
  size_t nchunks;
  bool compress;
  uint32_t workers;  // compression workers running (zworkers.cpp); 0: compress inline
  bool small;        // compress regions up to kSmallRegion inline (compress off, zstd loaded)
  bool any_z;        // some chunk was stored compressed: the header says so
  uint64_t started;  // writeback has been started for [.., started)
  uint64_t dropped;  // and [.., dropped) is on disk and out of the page cache
};

// Stream the image to disk instead of filling the page cache and fsyncing at the end: every kStream bytes
// start writeback of what was just written and wait for, then drop, the window before it. So the image
// occupies two windows of page cache, whose pages are reused while still warm. Measured on this VM (see
// src/core/env_posix.cc, which does the same for application-level checkpoints): every fresh page-cache
// page costs a host fault (the balloon hands freed guest pages back), so a multi-GB image written into new
// pages ran at a third of the disk's speed. The final fsync still makes the whole file durable.
constexpr uint64_t kStream = 8u << 20;

void stream_out(Out* o) {
  if (o->off - o->started < kStream) return;
  constexpr unsigned kWaitBefore = 1, kWrite = 2, kWaitAfter = 4;  // SYNC_FILE_RANGE_*
  sys::sc(SYS_sync_file_range, o->fd, o->started, o->off - o->started, kWrite);
  if (o->started > o->dropped) {
    sys::sc(SYS_sync_file_range, o->fd, o->dropped, o->started - o->dropped, kWaitBefore | kWrite | kWaitAfter);
    sys::sc(SYS_fadvise64, o->fd, o->dropped, o->started - o->dropped, 4 /*POSIX_FADV_DONTNEED*/);
    o->dropped = o->started;
  }
  o->started = o->off;
}

bool page_is_zero(const uint8_t* p) {
  auto* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < kPage / 8; i += 4)
    if (w[i] | w[i + 1] | w[i + 2] | w[i + 3]) return false;
  return true;
}

// Puts one stored chunk at the end of the file: its offset, stored length and checksum go in its record.
bool emit(Out* o, image::ChunkRecord* c, const void* data, uint64_t stored) {
  if (stored == c->len && o->off % kPage) {
    // A raw chunk starts on a page of the file, also after compressed frames: the restarter reads it
    // with O_DIRECT and `restart --lazy` maps it, and both need the file offset page-aligned.
    static const uint8_t kZeros[kPage] = {};
    const uint64_t pad = kPage - o->off % kPage;
    long r = sys::write_all(o->fd, kZeros, pad);
    if (r < 0) {
      o->err = r;
      return false;
    }
    o->off += pad;
  }
  c->file_offset = o->off;
  c->stored_len = stored;
  if (stored < c->len) o->any_z = true;
  c->xxh3 = XXH3_64bits(data, stored);
  long r = sys::write_all(o->fd, data, stored);
  if (r < 0) {
    o->err = r;
    return false;
  }
  // A raw chunk is written straight from memory, hashed before. Memory that changes meanwhile (written
  // by something the checkpoint does not stop: a process outside the computation sharing it, a kernel
  // facility, the engine's own bookkeeping in a page it also saves) left the file holding other bytes
  // than its checksum describes, and the image could never be restored ("checksum mismatch", seen once in
  // CI: mpi_cr.rank_dies, 16 KiB after the injected library's .bss). Hashed again after the write: when it
  // changed, a copy taken now is written over it and its hash recorded, so the image is whole (the chunk
  // holds the memory as it was at one moment of the write). One more XXH3 pass over raw chunks only.
  if (stored == c->len && XXH3_64bits(data, stored) != c->xxh3) {
    sys::copy(g.zout, data, stored);  // stored <= kChunkMax < zout_cap; zout is free once emit runs
    c->xxh3 = XXH3_64bits(g.zout, stored);
    for (uint64_t done = 0; done < stored;) {
      long w = sys::sc(SYS_pwrite64, o->fd, g.zout + done, stored - done, o->off + done);
      if (w == -4 /*EINTR*/) continue;
      if (w <= 0) {
        o->err = w < 0 ? w : -5;
        return false;
      }
      done += uint64_t(w);
    }
  }
  o->off += stored;
  stream_out(o);
  return true;
}

// Writes the oldest worker result (chunks reach the file in order). After an error it only waits, so
// that no worker still reads memory the caller is about to re-protect.
bool collect_one(Out* o) {
  uint32_t idx;
  const void* data;
  uint64_t stored;
  zw_oldest(&idx, &data, &stored);
  if (!o->err) emit(o, &g.chunks[idx], data, stored);
  zw_pop();
  return !o->err;
}

bool drain(Out* o) {
  while (!zw_empty()) collect_one(o);
  return !o->err;
}

bool flush_run(Out* o, uint64_t addr, uint64_t len) {
  if (!len) return true;
  if (o->nchunks >= g.chunks_cap) {
    o->err = -12;
    return false;
  }
  const uint32_t idx = uint32_t(o->nchunks++);
  image::ChunkRecord* c = &g.chunks[idx];
  c->addr = addr;
  c->len = len;
  const void* data = reinterpret_cast<const void*>(addr);
  if (o->compress && o->workers) {  // a worker compresses it; at most 2 per worker in flight
    while (zw_full())
      if (!collect_one(o)) return false;
    zw_submit(idx, data, len);
    return true;
  }
  if (!drain(o)) return false;  // earlier chunks first
  uint64_t stored = len;
  if (o->compress) {
    long n = compress_chunk(data, len, g.zout, g.zout_cap);
    if (n > 0 && uint64_t(n) < len) {  // else stored as is: stored_len == len means raw
      data = g.zout;
      stored = uint64_t(n);
    }
  }
  return emit(o, c, data, stored);
}

bool save_region_bytes(Out* o, int pm_fd, image::RegionRecord* r, bool elsewhere);

bool save_region(Out* o, int pm_fd, image::RegionRecord* r, bool elsewhere) {
  const bool c = o->compress;
  if (o->small && r->end - r->start <= kSmallRegion) o->compress = true;  // inline: no workers run then
  const bool ok = save_region_bytes(o, pm_fd, r, elsewhere);
  o->compress = c;
  return ok;
}

bool save_region_bytes(Out* o, int pm_fd, image::RegionRecord* r, bool elsewhere) {
  r->first_chunk = uint32_t(o->nchunks);
  r->chunk_count = 0;
  if (elsewhere) return true;  // another process of the computation stores this shared range
  const bool all = r->flags & image::kRegSavedAll;
  if (r->flags & image::kRegSpecial) {
    // The vdso's bytes let the restarter refuse a kernel whose vdso differs (libc caches pointers into it).
    bool ok = true;
    if (sys::starts_with(r->path, "[vdso]")) {
      const bool c = o->compress;
      o->compress = false;  // stored raw: the restarter compares it byte for byte
      ok = flush_run(o, r->start, r->end - r->start);
      o->compress = c;
    }
    r->chunk_count = uint32_t(o->nchunks - r->first_chunk);
    return ok;
  }
  // A disk file's shared writable mapping: every page below the file's end (beyond it a read would fault
  // with SIGBUS), through the mapping; pages not in memory are read from the file.
  const bool whole_file = r->flags & image::kRegSharedFileAll;
  const uint64_t file_end = r->start + (r->file_size > r->file_offset ? r->file_size - r->file_offset : 0);
  if (!all && !whole_file && (r->flags & image::kRegShared)) return true;
  bool opened = false;  // made readable for the copy
  bool ok = true;
  uint64_t run_start = 0, run_len = 0;
  for (uint64_t a = r->start; a < r->end;) {
    uint64_t n = (r->end - a) / kPage;
    if (n > g.pagemap_cap) n = g.pagemap_cap;
    // Shared memory: our page tables say nothing about pages another process (or write()) filled, so
    // ask the page cache (mincore) instead of pagemap.
    const bool shared = (all || whole_file) && (r->flags & image::kRegShared);
    auto* resident = reinterpret_cast<unsigned char*>(g.pagemap);
    long got = whole_file ? 0
               : shared   ? sys::sc(SYS_mincore, a, n * kPage, resident)
                          : sys::sc(SYS_pread64, pm_fd, g.pagemap, n * 8, (a / kPage) * 8);
    if (whole_file)
      for (uint64_t i = 0; i < n; ++i) resident[i] = a + i * kPage < file_end;
    if (got < 0 || (!shared && got == 0)) {
      o->err = got < 0 ? got : -5;
      ok = false;
      goto done;
    }
    if (!shared) n = uint64_t(got) / 8;
    for (uint64_t i = 0; i < n; ++i, a += kPage) {
      const uint64_t pm = shared ? 0 : g.pagemap[i];
      bool want = (r->flags & image::kRegFromImage) || (shared && (resident[i] & 1)) ||
                  ((pm & (kPmPresent | kPmSwap)) && (all || !(pm & kPmFile)));
      if (want && !(r->prot & PROT_READ) && !opened) {
        sys::sc(SYS_mprotect, r->start, r->end - r->start, r->prot | PROT_READ);
        opened = true;
      }
      if (want) want = !page_is_zero(reinterpret_cast<const uint8_t*>(a));
      if (want && run_len && run_start + run_len == a && run_len < kChunkMax) {
        run_len += kPage;
        continue;
      }
      if (!flush_run(o, run_start, run_len)) {
        ok = false;
        goto done;
      }
      run_len = 0;
      if (want) run_start = a, run_len = kPage;
    }
  }
  ok = flush_run(o, run_start, run_len);
done:
  if (opened) {
    ok = drain(o) && ok;  // workers must be done reading before the region closes again
    sys::sc(SYS_mprotect, r->start, r->end - r->start, r->prot);
  }
  r->chunk_count = uint32_t(o->nchunks - r->first_chunk);
  return ok;
}

// XXH3 of the kernel's boot id: names this machine (and boot) so that equal dev:inode pairs of two hosts
// in one checkpoint directory are never taken for one object. 0 when unreadable.
uint64_t host_id() {
  char id[64];
  int fd = int(sys::sc(SYS_open, "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  long n = sys::sc(SYS_read, fd, id, sizeof id);
  sys::sc(SYS_close, fd);
  return n > 0 ? XXH3_64bits(id, size_t(n)) : 0;
}

uint32_t shm_kind(const image::RegionRecord& r) {
  if (sys::starts_with(r.path, "/SYSV")) return image::kShmSysV;
  if (sys::starts_with(r.path, "/dev/zero") || sys::starts_with(r.path, "[anon_shmem:")) return image::kShmAnon;
  if (sys::starts_with(r.path, "/memfd:")) return image::kShmMemfd;
  if (r.flags & image::kRegSharedFileAll) return image::kShmDiskFile;
  if (r.flags & image::kRegFile) return image::kShmTmpfsFile;
  return image::kShmDeleted;
}

// Describes shared region i and decides whether this image stores its bytes. Under a coordinator every
// process of the generation is suspended from before the first image is written until the last one is
// (docs/protocol.md: the write phase is a barrier between suspend and resume), so the bytes of a range
// are the same whoever reads them: the first process to create the range's claim file in the generation's
// directory (O_EXCL) stores them, the others only point at it. A failed attempt's directory is emptied
// before the generation is taken again (claims included). A standalone checkpoint stores everything.
void describe_shm(image::ShmRecord* s, uint32_t i, const char* dir, uint64_t host) {
  const image::RegionRecord& r = g.regions[i];
  sys::zero(s, sizeof *s);
  s->region = i;
  s->kind = shm_kind(r);
  s->host = host;
  s->dev = r.dev;
  s->ino = r.ino;
  if (s->kind == image::kShmTmpfsFile || s->kind == image::kShmDiskFile) s->size = r.file_size;
  if (s->kind == image::kShmSysV) {
    s->sysv_id = int32_t(r.ino);
    const char* k = r.path + 5;
    s->sysv_key = int32_t(sys::parse_hex(k));  // the key it was created with (IPC_STAT says 0 once removed)
    s->sysv_mode = 0600;
    struct shmid_ds ds;
    if (sys::sc(SYS_shmctl, s->sysv_id, IPC_STAT, &ds) == 0) {
      s->sysv_key = int32_t(ds.shm_perm.__key);
      s->sysv_mode = ds.shm_perm.mode & 0777;
      s->size = ds.shm_segsz;
      if (ds.shm_perm.mode & SHM_DEST) s->flags |= image::kShmSysvDest;
    }
  }
  if (g.coord_fd < 0) return;
  char claim[2300] = "";
  sys::append(claim, sizeof claim, dir);
  sys::append(claim, sizeof claim, "/.shm-");
  const uint64_t parts[] = {host, r.dev, r.ino, r.file_offset, r.end - r.start};
  for (uint64_t v : parts) {
    sys::append_u64(claim, sizeof claim, v);
    sys::append(claim, sizeof claim, "-");
  }
  sys::append(claim, sizeof claim, "claim");
  long fd = sys::sc(SYS_open, claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) sys::sc(SYS_close, fd);
  else if (fd == -17 /*EEXIST*/) s->flags |= image::kShmBytesElsewhere;
  // Any other error (read-only directory?): store the bytes here, as a standalone checkpoint does.
}

bool put_section(Out* o, image::SectionEntry* e, const char* name, uint32_t kind, uint32_t version, const void* p,
                 uint64_t len) {
  sys::zero(e, sizeof *e);
  for (size_t i = 0; name[i] && i + 1 < sizeof e->name; ++i) e->name[i] = name[i];
  e->kind = kind;
  e->version = version;
  static const uint8_t pad[8] = {0};
  uint64_t fill = (8 - o->off % 8) % 8;
  if (fill && sys::write_all(o->fd, pad, fill) < 0) return false;
  o->off += fill;
  e->offset = o->off;
  e->length = len;
  e->xxh3 = XXH3_64bits(p, len);
  long r = len ? sys::write_all(o->fd, p, len) : 0;
  if (r < 0) {
    o->err = r;
    return false;
  }
  o->off += len;
  return true;
}

void copy_str(char* dst, size_t cap, const char* s) {
  dst[0] = 0;
  sys::append(dst, cap, s);
}

long fail(char* err, size_t n, const char* what, const char* path, long code) {
  sys::append(err, n, what);
  sys::append(err, n, path);
  sys::append(err, n, " (errno ");
  sys::append_u64(err, n, uint64_t(-code));
  sys::append(err, n, ")");
  return code < 0 ? code : -5;
}

}  // namespace

long write_image(const char* dir, const char* path, uint64_t gen, bool forked, char* err, size_t err_len) {
  char tmp[2100] = "";
  sys::append(tmp, sizeof tmp, path);
  sys::append(tmp, sizeof tmp, ".tmp");
  int fd = int(sys::sc(SYS_open, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd < 0) return fail(err, err_len, "cannot create ", tmp, fd);
  g.image_fd = fd;
  image::ProcessInfo* pi = &g.proc;
  zw_forget_restored();
  long nreg = read_maps(pi);
  int pm_fd = int(sys::sc(SYS_open, "/proc/thread-self/pagemap", O_RDONLY | O_CLOEXEC));
  const bool zstd = (g.cfg.compress || g.cfg.compress_small) && compress_ready() &&
                    compress_bound(kChunkMax) <= g.zout_cap;
  const bool compress = g.cfg.compress && zstd;
  // Workers start after read_maps: their memory is not among the regions this image saves (and is
  // in g.excl besides).
  const uint32_t workers = compress ? zw_start(g.cfg.zthreads, compress_bound(kChunkMax)) : 0;
  Out o = {fd, image::kHeaderSize, 0, 0, compress, workers, !compress && zstd, false, 0, 0};
  bool ok = nreg >= 0 && pm_fd >= 0 && sys::sc(SYS_lseek, fd, image::kHeaderSize, 0 /*SEEK_SET*/) >= 0;
  if (!ok) o.err = nreg < 0 ? nreg : -5;
  // Shared memory objects first: a forked writer's parent (and with it, through the coordinator's resume
  // barrier, every process of the computation) lets the program go on only once they are read, because
  // unlike private memory they are not frozen by the fork's copy-on-write.
  const uint64_t host = host_id();
  uint32_t nshm = 0;
  for (long i = 0; ok && i < nreg; ++i) {
    if (!(g.regions[i].flags & image::kRegShmObj)) continue;
    if (nshm >= g.shm_cap) {
      o.err = -12;
      ok = false;
      break;
    }
    describe_shm(&g.shm[nshm], uint32_t(i), dir, host);
    ok = save_region(&o, pm_fd, &g.regions[i], g.shm[nshm++].flags & image::kShmBytesElsewhere);
  }
  if (g.shm_pass_fd >= 0) {
    const char said = nshm ? '1' : '0';
    sys::sc(SYS_write, g.shm_pass_fd, &said, 1);
    sys::sc(SYS_close, g.shm_pass_fd);
    g.shm_pass_fd = -1;
  }
  for (long i = 0; ok && i < nreg; ++i)
    if (!(g.regions[i].flags & image::kRegShmObj)) ok = save_region(&o, pm_fd, &g.regions[i], false);
  ok = drain(&o) && ok;
  zw_stop();
  if (pm_fd >= 0) sys::sc(SYS_close, pm_fd);

  // Tables.
  uint32_t nthreads = g.nslots < kMaxThreads ? g.nslots : kMaxThreads;
  pi->restart_info_addr = reinterpret_cast<uint64_t>(&g_restart_info);
  pi->rseq_offset = uint64_t(g.rseq_offset);
  pi->rseq_size = g.rseq_size;
  pi->rseq_sig = 0x53053053;
  pi->thread_count = nthreads + 1;
  pi->tid_offset = g.tid_offset;
  image::SectionEntry dir_entries[5 + kMaxPluginSections];
  uint32_t nd = 0;
  ok = ok && put_section(&o, &dir_entries[nd++], image::kSecProcess, image::kKindEngine, image::kProcessVersion, pi,
                         sizeof *pi);
  // Threads: user threads' slots then the checkpoint thread. ThreadSlot starts with its record, but the
  // slots are not contiguous records, so they go through a small staging array on the stack in batches.
  if (ok) {
    image::SectionEntry* e = &dir_entries[nd++];
    static image::ThreadRecord recs[kMaxThreads + 1];  // checkpoint thread only
    for (uint32_t i = 0; i < nthreads; ++i) recs[i] = g.slots[i].rec;
    recs[nthreads] = g.ckpt_rec;
    // The tids the program sees (virtual after a restart without pid recreation): a later restart
    // recreates those, or maps them again.
    for (uint32_t i = 0; i <= nthreads; ++i) recs[i].tid = uint64_t(vpid::to_virt(pid_t(recs[i].tid)));
    ok = put_section(&o, e, image::kSecThreads, image::kKindEngine, image::kThreadsVersion, recs,
                     (nthreads + 1) * sizeof(image::ThreadRecord));
  }
  ok = ok && put_section(&o, &dir_entries[nd++], image::kSecRegions, image::kKindEngine, image::kRegionsVersion,
                         g.regions, uint64_t(nreg) * sizeof(image::RegionRecord));
  ok = ok && put_section(&o, &dir_entries[nd++], image::kSecChunks, image::kKindEngine, image::kChunksVersion,
                         g.chunks, o.nchunks * sizeof(image::ChunkRecord));
  if (ok && nshm)
    ok = put_section(&o, &dir_entries[nd++], image::kSecShm, image::kKindEngine, image::kShmVersion, g.shm,
                     nshm * sizeof(image::ShmRecord));
  for (uint32_t i = 0; ok && i < g.plugin_out_count; ++i) {
    const PluginOut& po = g.plugin_out[i];
    ok = put_section(&o, &dir_entries[nd++], po.name, image::kKindPlugin, po.version, po.data.p, po.data.len);
  }
  // Directory, trailer, header.
  uint64_t dir_off = (o.off + 7) / 8 * 8;
  if (ok && dir_off != o.off) {
    static const uint8_t pad[8] = {0};
    ok = sys::write_all(fd, pad, dir_off - o.off) == 0;
    o.off = dir_off;
  }
  ok = ok && sys::write_all(fd, dir_entries, nd * sizeof(image::SectionEntry)) == 0;
  o.off += nd * sizeof(image::SectionEntry);
  image::Trailer t;
  sys::zero(&t, sizeof t);
  sys::copy(t.magic, image::kTrailerMagic, sizeof t.magic);
  t.dir_offset = dir_off;
  t.dir_count = nd;
  t.file_size = o.off + sizeof t;
  t.dir_xxh3 = XXH3_64bits(dir_entries, nd * sizeof(image::SectionEntry));
  t.trailer_xxh3 = XXH3_64bits(&t, offsetof(image::Trailer, trailer_xxh3));
  ok = ok && sys::write_all(fd, &t, sizeof t) == 0;
  image::FileHeader h;
  sys::zero(&h, sizeof h);
  sys::copy(h.magic, image::kMagic, sizeof h.magic);
  h.version = image::kFormatVersion;
  h.arch = image::kArchX86_64;
  h.page_size = uint32_t(kPage);
  h.flags = image::kFlagSparse | (forked ? uint32_t{image::kFlagForked} : 0u) |
            (compress || o.any_z ? uint32_t{image::kFlagCompressed} : 0u);
  h.dir_offset = dir_off;
  h.dir_count = nd;
  h.file_size = t.file_size;
  h.pid = uint64_t(vpid::active() ? vpid::g_vpid : sys::getpid());
  h.upid = g.upid;
  h.generation = gen;
  struct timespec ts;
  sys::sc(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  h.created_unix_ns = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
  struct utsname u;
  if (sys::sc(SYS_uname, &u) == 0) copy_str(h.kernel, sizeof h.kernel, u.release);
  copy_str(h.glibc, sizeof h.glibc, gnu_get_libc_version());
  copy_str(h.prog, sizeof h.prog, g.cfg.prog);
  h.header_xxh3 = XXH3_64bits(&h, offsetof(image::FileHeader, header_xxh3));
  ok = ok && sys::sc(SYS_pwrite64, fd, &h, sizeof h, 0) == long(sizeof h);
  long r = ok ? sys::sc(SYS_fsync, fd) : 0;
  ok = ok && r == 0;
  sys::sc(SYS_close, fd);
  g.image_fd = -1;
  if (!ok) {
    sys::sc(SYS_unlink, tmp);
    return fail(err, err_len, "cannot write image ", tmp, o.err ? o.err : r ? r : -5);
  }
  r = sys::sc(SYS_rename, tmp, path);
  if (r < 0) return fail(err, err_len, "cannot rename into ", path, r);
  int dfd = int(sys::sc(SYS_open, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd >= 0) {
    sys::sc(SYS_fsync, dfd);
    sys::sc(SYS_close, dfd);
  }
  return long(t.file_size);
}

}  // namespace revive::inject
