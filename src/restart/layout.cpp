// Where the restarter itself lives, whether that collides with the saved address space, and moving the
// kernel's special mappings to where the restored libc expects them.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "restart/restart.h"

namespace revive::restart {
namespace {

char g_maps[1 << 20];

bool is_special(const char* name) {
  return strncmp(name, "[vdso]", 6) == 0 || strncmp(name, "[vvar", 5) == 0 || strncmp(name, "[vsyscall]", 10) == 0;
}

bool overlap(uint64_t a, uint64_t b, uint64_t c, uint64_t d) { return a < d && c < b; }

const Range* find(const Range* own, size_t n, const char* name) {
  for (size_t i = 0; i < n; ++i)
    if (strcmp(own[i].name, name) == 0) return &own[i];
  return nullptr;
}

}  // namespace

long read_own_maps(Range* out, size_t cap) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  for (ssize_t r; (r = read(fd, g_maps + len, sizeof g_maps - 1 - len)) > 0;) len += size_t(r);
  close(fd);
  g_maps[len] = 0;
  size_t n = 0;
  for (char* p = g_maps; *p && n < cap;) {
    char* eol = strchr(p, '\n');
    if (!eol) eol = p + strlen(p);
    Range& r = out[n++];
    r.start = strtoull(p, &p, 16);
    r.end = strtoull(p + 1, &p, 16);
    // Fields: perms offset dev inode path.
    for (int f = 0; f < 4; ++f) {
      while (*p == ' ') ++p;
      while (*p && *p != ' ' && *p != '\n') ++p;
    }
    while (*p == ' ') ++p;
    size_t k = 0;
    while (p < eol && k + 1 < sizeof r.name) r.name[k++] = *p++;
    r.name[k] = 0;
    p = *eol ? eol + 1 : eol;
  }
  return long(n);
}

bool collides(const image::View& v, const Range* own, size_t n, char* what, size_t what_len) {
  for (size_t i = 0; i < n; ++i) {
    if (is_special(own[i].name)) continue;
    for (uint32_t k = 0; k < v.region_count; ++k) {
      const image::RegionRecord& r = v.regions[k];
      // The vsyscall page sits at the same fixed address in every process.
      if ((r.flags & image::kRegSpecial) && strncmp(r.path, "[vsyscall]", 10) == 0) continue;
      if (overlap(r.start, r.end, own[i].start, own[i].end)) {
        snprintf(what, what_len, "saved region %llx-%llx %s overlaps restarter mapping %llx-%llx %s",
                 (unsigned long long)r.start, (unsigned long long)r.end, r.path, (unsigned long long)own[i].start,
                 (unsigned long long)own[i].end, own[i].name);
        return true;
      }
    }
  }
  return false;
}

bool move_specials(const image::View& v, const Range* own, size_t n, char* err, size_t err_len) {
  const image::ProcessInfo* pi = v.process;
  struct Pair {
    const char* name;
    uint64_t old_start, old_end;
    const Range* cur;
  } pairs[] = {{"[vvar]", pi->vvar_start, pi->vvar_end, find(own, n, "[vvar]")},
               {"[vvar_vclock]", pi->vclock_start, pi->vclock_end, find(own, n, "[vvar_vclock]")},
               {"[vdso]", pi->vdso_start, pi->vdso_end, find(own, n, "[vdso]")}};
  uint64_t total = 0;
  for (const Pair& p : pairs) {
    uint64_t old_len = p.old_end - p.old_start, cur_len = p.cur ? p.cur->end - p.cur->start : 0;
    if (old_len != cur_len) {
      snprintf(err, err_len,
               "%s is %llu bytes in the image but %llu bytes on this kernel: the restored libc would call into a "
               "different vdso; restart on the kernel that wrote the image",
               p.name, (unsigned long long)old_len, (unsigned long long)cur_len);
      return false;
    }
    total += cur_len;
  }
  // Same vdso code? The image stores its bytes (chunk of the [vdso] region).
  const Range* vd = pairs[2].cur;
  for (uint32_t k = 0; vd && k < v.region_count; ++k) {
    const image::RegionRecord& r = v.regions[k];
    if (!(r.flags & image::kRegSpecial) || strncmp(r.path, "[vdso]", 6) != 0) continue;
    for (uint32_t c = r.first_chunk; c < r.first_chunk + r.chunk_count; ++c) {
      const image::ChunkRecord& ck = v.chunks[c];
      if (ck.len > vd->end - vd->start ||
          memcmp(reinterpret_cast<const void*>(vd->start + (ck.addr - r.start)), v.base + ck.file_offset, ck.len)) {
        snprintf(err, err_len,
                 "[vdso] code differs from the image's (written on kernel %s): restart on the kernel that wrote "
                 "the image",
                 v.hdr->kernel);
        return false;
      }
    }
  }
  if (!total) return true;
  // Two steps through a scratch hole, so a new place that overlaps the current one is no problem.
  void* hole = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (hole == MAP_FAILED) {
    snprintf(err, err_len, "mmap of %llu bytes failed: %s", (unsigned long long)total, strerror(errno));
    return false;
  }
  uint64_t off = 0;
  uint64_t tmp[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const Pair& p = pairs[i];
    if (!p.cur) continue;
    uint64_t len = p.cur->end - p.cur->start;
    tmp[i] = reinterpret_cast<uint64_t>(hole) + off;
    if (mremap(reinterpret_cast<void*>(p.cur->start), len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
               reinterpret_cast<void*>(tmp[i])) == MAP_FAILED) {
      snprintf(err, err_len, "cannot move %s: %s", p.name, strerror(errno));
      return false;
    }
    off += len;
  }
  for (int i = 0; i < 3; ++i) {
    const Pair& p = pairs[i];
    if (!p.cur) continue;
    uint64_t len = p.old_end - p.old_start;
    if (mremap(reinterpret_cast<void*>(tmp[i]), len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
               reinterpret_cast<void*>(p.old_start)) == MAP_FAILED) {
      snprintf(err, err_len, "cannot move %s to %llx: %s", p.name, (unsigned long long)p.old_start, strerror(errno));
      return false;
    }
  }
  return true;
}

}  // namespace revive::restart
