#include "image/view.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#define XXH_INLINE_ALL  // header-only: the static restart program links nothing extra
#include <xxhash.h>

namespace revive::image {
namespace {

bool fail(char* err, size_t n, const char* name, const char* what) {
  snprintf(err, n, "image %s: %s", name, what);
  return false;
}

template <class T>
bool table(const char* name, const View& v, const char* sec, uint32_t version, const T** out, uint32_t* count,
           char* err, size_t n) {
  const SectionEntry* e = find_section(v, kKindEngine, sec);
  char msg[160];
  if (!e) {
    snprintf(msg, sizeof msg, "missing section '%s'", sec);
    return fail(err, n, name, msg);
  }
  if (e->version != version) {
    snprintf(msg, sizeof msg, "section '%s' has schema version %u, this build reads %u", sec, e->version, version);
    return fail(err, n, name, msg);
  }
  if (e->length % sizeof(T) != 0) {
    snprintf(msg, sizeof msg, "section '%s' length %llu is not a multiple of its record size", sec,
             (unsigned long long)e->length);
    return fail(err, n, name, msg);
  }
  *out = reinterpret_cast<const T*>(v.base + e->offset);
  *count = static_cast<uint32_t>(e->length / sizeof(T));
  return true;
}

// The optional "shm" table (format 2): every record names a shared region flagged kRegShmObj, a known
// kind, and a region whose bytes are elsewhere stores none here; every kRegShmObj region has one record.
bool check_shm(const char* name, View* v, char* err, size_t n) {
  char msg[200];
  if (find_section(*v, kKindEngine, kSecShm)) {
    if (v->hdr->version < 2) return fail(err, n, name, "section 'shm' in a format version 1 image");
    if (!table(name, *v, kSecShm, kShmVersion, &v->shm, &v->shm_count, err, n)) return false;
  }
  uint32_t flagged = 0;
  for (uint32_t i = 0; i < v->region_count; ++i) flagged += (v->regions[i].flags & kRegShmObj) ? 1 : 0;
  if (flagged != v->shm_count) {
    snprintf(msg, sizeof msg, "%u region(s) flagged as shared memory objects but %u record(s) in section 'shm'",
             flagged, v->shm_count);
    return fail(err, n, name, msg);
  }
  for (uint32_t i = 0; i < v->shm_count; ++i) {
    const ShmRecord& s = v->shm[i];
    const char* why = nullptr;
    if (s.region >= v->region_count) why = "names no region";
    else if ((v->regions[s.region].flags & (kRegShared | kRegShmObj)) != (kRegShared | kRegShmObj))
      why = "names a region that is not a shared memory object";
    else if (i > 0 && s.region <= v->shm[i - 1].region) why = "is out of region order (or a duplicate)";
    else if (s.kind < kShmAnon || s.kind > kShmDiskFile) why = "has an unknown kind";
    else if ((s.flags & kShmBytesElsewhere) && v->regions[s.region].chunk_count != 0)
      why = "says its bytes are elsewhere but its region stores some";
    else if (s.flags & ~uint32_t(kShmBytesElsewhere | kShmSysvDest)) why = "has unknown flags";
    else if (s.kind == kShmSysV && (s.sysv_id < 0 || uint64_t(s.sysv_id) != s.ino)) why = "has a bad SysV id";
    if (why) {
      snprintf(msg, sizeof msg, "shared memory record %u %s (malformed section 'shm')", i, why);
      return fail(err, n, name, msg);
    }
  }
  return true;
}

}  // namespace

const ShmRecord* shm_of(const View& v, uint32_t region) {
  uint32_t lo = 0, hi = v.shm_count;  // binary search: open_view checked the order
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (v.shm[mid].region < region) lo = mid + 1;
    else hi = mid;
  }
  return lo < v.shm_count && v.shm[lo].region == region ? &v.shm[lo] : nullptr;
}

const SectionEntry* find_section(const View& v, uint32_t kind, const char* sec_name) {
  for (uint32_t i = 0; i < v.dir_count; ++i)
    if (v.dir[i].kind == kind && strncmp(v.dir[i].name, sec_name, sizeof v.dir[i].name) == 0) return &v.dir[i];
  return nullptr;
}

bool open_view(const char* name, const uint8_t* base, uint64_t size, View* v, char* err, size_t n) {
  *v = View{};
  v->base = base;
  v->size = size;
  char msg[200];
  if (size == 0) return fail(err, n, name, "file is empty");
  if (size < kHeaderSize + sizeof(Trailer)) {
    if (size >= sizeof kMagic && memcmp(base, kMagic, sizeof kMagic) == 0)
      return fail(err, n, name, "truncated (shorter than header + trailer)");
    return fail(err, n, name, "not a revive image (too short, bad magic)");
  }
  const FileHeader* h = reinterpret_cast<const FileHeader*>(base);
  if (memcmp(h->magic, kMagic, sizeof kMagic) != 0) return fail(err, n, name, "not a revive image (bad magic)");
  if (XXH3_64bits(h, offsetof(FileHeader, header_xxh3)) != h->header_xxh3)
    return fail(err, n, name, "header checksum mismatch (corrupted header)");
  if (h->version < kFormatVersionMin || h->version > kFormatVersion) {
    snprintf(msg, sizeof msg, "format version %u, this build reads versions %u to %u", h->version,
             kFormatVersionMin, kFormatVersion);
    return fail(err, n, name, msg);
  }
  if (h->arch != kArchX86_64) {
    snprintf(msg, sizeof msg, "written for architecture %u (ELF machine), this is x86_64 (62)", h->arch);
    return fail(err, n, name, msg);
  }
  if (h->page_size != static_cast<uint32_t>(sysconf(_SC_PAGESIZE))) {
    snprintf(msg, sizeof msg, "page size %u differs from this machine's %ld", h->page_size, sysconf(_SC_PAGESIZE));
    return fail(err, n, name, msg);
  }
  if (h->file_size != size) {
    snprintf(msg, sizeof msg, "truncated or extended: header says %llu bytes, file has %llu",
             (unsigned long long)h->file_size, (unsigned long long)size);
    return fail(err, n, name, msg);
  }
  const Trailer* t = reinterpret_cast<const Trailer*>(base + size - sizeof(Trailer));
  if (memcmp(t->magic, kTrailerMagic, sizeof kTrailerMagic) != 0 ||
      XXH3_64bits(t, offsetof(Trailer, trailer_xxh3)) != t->trailer_xxh3)
    return fail(err, n, name, "trailer missing or corrupted (incomplete write?)");
  if (t->dir_offset != h->dir_offset || t->dir_count != h->dir_count || t->file_size != size)
    return fail(err, n, name, "trailer disagrees with header");
  if (h->dir_offset < kHeaderSize || h->dir_count > 4096 ||
      h->dir_offset + uint64_t{h->dir_count} * sizeof(SectionEntry) > size - sizeof(Trailer))
    return fail(err, n, name, "section directory out of bounds");
  v->hdr = h;
  v->dir = reinterpret_cast<const SectionEntry*>(base + h->dir_offset);
  v->dir_count = h->dir_count;
  if (XXH3_64bits(v->dir, uint64_t{v->dir_count} * sizeof(SectionEntry)) != t->dir_xxh3)
    return fail(err, n, name, "section directory checksum mismatch");
  for (uint32_t i = 0; i < v->dir_count; ++i) {
    const SectionEntry& e = v->dir[i];
    char sname[sizeof e.name + 1];
    memcpy(sname, e.name, sizeof e.name);
    sname[sizeof e.name] = 0;
    if (e.offset < kHeaderSize || e.offset > h->dir_offset || e.length > h->dir_offset - e.offset) {
      snprintf(msg, sizeof msg, "section '%s' out of bounds", sname);
      return fail(err, n, name, msg);
    }
    if (e.offset % 8 != 0) {
      snprintf(msg, sizeof msg, "section '%s' misaligned", sname);
      return fail(err, n, name, msg);
    }
    if (XXH3_64bits(base + e.offset, e.length) != e.xxh3) {
      snprintf(msg, sizeof msg, "section '%s' checksum mismatch (corrupted)", sname);
      return fail(err, n, name, msg);
    }
  }
  uint32_t one = 0;
  if (!table(name, *v, kSecProcess, kProcessVersion, &v->process, &one, err, n)) return false;
  if (one != 1) return fail(err, n, name, "section 'process' must hold exactly one record");
  if (!table(name, *v, kSecThreads, kThreadsVersion, &v->threads, &v->thread_count, err, n)) return false;
  if (!table(name, *v, kSecRegions, kRegionsVersion, &v->regions, &v->region_count, err, n)) return false;
  if (!table(name, *v, kSecChunks, kChunksVersion, &v->chunks, &v->chunk_count, err, n)) return false;
  if (v->thread_count == 0) return fail(err, n, name, "no threads recorded");
  const bool compressed = h->flags & kFlagCompressed;
  for (uint32_t i = 0; i < v->region_count; ++i) {
    const RegionRecord& r = v->regions[i];
    if (r.end <= r.start || r.start % h->page_size || r.end % h->page_size ||
        uint64_t{r.first_chunk} + r.chunk_count > v->chunk_count) {
      snprintf(msg, sizeof msg, "region %u (%llx-%llx) malformed", i, (unsigned long long)r.start,
               (unsigned long long)r.end);
      return fail(err, n, name, msg);
    }
    for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count; ++c) {
      const ChunkRecord& k = v->chunks[c];
      bool bad = k.addr < r.start || k.len > r.end - k.addr || k.len % h->page_size || k.addr % h->page_size ||
                 k.file_offset < kHeaderSize || k.stored_len > k.len ||
                 k.file_offset > h->dir_offset - k.stored_len || (!compressed && k.stored_len != k.len) ||
                 (!compressed && k.file_offset % h->page_size);
      if (bad) {
        snprintf(msg, sizeof msg, "chunk %u of region %llx-%llx out of bounds", c, (unsigned long long)r.start,
                 (unsigned long long)r.end);
        return fail(err, n, name, msg);
      }
    }
  }
  return check_shm(name, v, err, n);
}

bool verify_chunk(const char* name, const View& v, uint32_t i, char* err, size_t n) {
  if (i >= v.chunk_count) return fail(err, n, name, "chunk index out of range");
  const ChunkRecord& k = v.chunks[i];
  if (XXH3_64bits(v.base + k.file_offset, k.stored_len) != k.xxh3) {
    char msg[160];
    snprintf(msg, sizeof msg, "data chunk %u (memory %llx, %llu bytes at file offset %llu) checksum mismatch", i,
             (unsigned long long)k.addr, (unsigned long long)k.len, (unsigned long long)k.file_offset);
    return fail(err, n, name, msg);
  }
  return true;
}

}  // namespace revive::image
