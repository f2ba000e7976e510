// fd plugin, checkpoint side: this process's shared mappings of deleted files, read from /proc/self/maps
// with read(2) into a static buffer (save runs with user threads suspended: no allocation).
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "plugins/fd/fd_internal.h"

namespace revive::plugins {
namespace {

uint64_t hex(char*& p) {
  uint64_t v = 0;
  for (;; ++p) {
    char c = *p;
    int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (x < 0) return v;
    v = v * 16 + uint64_t(x);
  }
}

// "start-end perms offset major:minor inode   path" into m (path points into line); false if malformed.
bool parse(char* line, MapLine& m) {
  char* p = line;
  m.start = hex(p);
  if (*p != '-') return false;
  m.end = hex(++p);
  if (p[0] != ' ' || strlen(p) < 6) return false;
  m.shared = p[4] == 's';
  p += 6;
  m.offset = hex(p);
  m.dev_major = *p == ' ' ? hex(++p) : ~0ull;
  m.dev_minor = *p == ':' ? hex(++p) : ~0ull;
  m.ino = 0;
  if (*p == ' ')
    for (++p; *p >= '0' && *p <= '9'; ++p) m.ino = m.ino * 10 + uint64_t(*p - '0');
  while (*p == ' ') ++p;
  m.path = p;
  return true;
}

// Whether m maps the inode of st.
bool map_is(const MapLine& m, const struct stat& st) {
  return m.ino == uint64_t(st.st_ino) && m.dev_major == major(st.st_dev) && m.dev_minor == minor(st.st_dev);
}

}  // namespace

void each_map(bool (*f)(const MapLine&, void*), void* arg) {
  static char buf[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t have = 0;
  for (bool eof = false, more = true; more && !(eof && have == 0);) {
    if (!eof) {
      ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
      if (r <= 0) eof = true;
      else have += size_t(r);
    }
    buf[have] = 0;
    char* nl = strchr(buf, '\n');
    if (!nl && !eof && have < sizeof buf - 1) continue;
    if (nl) *nl = 0;
    MapLine m;
    if (parse(buf, m)) more = f(m, arg);
    size_t used = nl ? size_t(nl + 1 - buf) : have;
    memmove(buf, buf + used, have - used);
    have -= used;
  }
  close(fd);
}

// Such a deleted file's bytes are stored once, as shared memory (the engine's shm records), and the restart
// hands that same object to the descriptor: a program (UCX's posix transport) that maps the file and lets
// peers open it through /proc/PID/fd/N keeps one object, not a mapping and a copy. A mapping in part is
// an object of its own at restart: the fd plugin refuses to save a descriptor beside it (issue 13).
uint64_t shared_mapping_of(const struct stat& st, MapLine* part) {
  struct Find {
    const struct stat* st;
    uint64_t whole;
    MapLine part;
  } find{&st, 0, {}};
  each_map(
      [](const MapLine& m, void* a) {
        auto* f = static_cast<Find*>(a);
        if (!m.shared || !map_is(m, *f->st)) return true;
        if (m.offset == 0 && m.end - m.start >= uint64_t(f->st->st_size)) f->whole = m.start;
        else if (f->part.end == 0) f->part = m, f->part.path = nullptr;  // the buffer is reused
        return f->whole == 0;
      },
      &find);
  if (part) *part = find.whole == 0 ? find.part : MapLine{};
  return find.whole;
}

}  // namespace revive::plugins
