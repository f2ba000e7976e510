// See file_locks.h.
#include "plugins/common/file_locks.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>

#include "plugins/common/msg.h"
#include "plugins/common/fdinfo.h"

namespace revive::plugins {
namespace {

char g_info[64 << 10];

const char* skip_word(const char* p) {
  while (*p == ' ' || *p == '\t') ++p;
  while (*p && *p != ' ' && *p != '\t' && *p != '\n') ++p;
  return p;
}
const char* word(const char* p) {
  while (*p == ' ' || *p == '\t') ++p;
  return p;
}
bool starts(const char* p, const char* w) { return strncmp(p, w, strlen(w)) == 0; }
int64_t number(const char* p) {
  uint64_t v = 0;
  fdinfo_parse(p, 10, &v);
  return int64_t(v);
}

}  // namespace

int file_locks_of(int fd, LockRecord* out, int cap, char* why, size_t why_cap) {
  if (!fdinfo_load(fd, g_info, sizeof g_info)) return 0;  // nothing to say: no locks known
  int n = 0;
  for (const char* p = g_info; (p = strstr(p, "lock:\t")); ) {
    // "lock:\t1: POSIX  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"
    const char* q = skip_word(p + 6);          // "1:"
    const char* kind = word(q);
    q = skip_word(kind);                       // the kind
    q = skip_word(q);                          // ADVISORY / MANDATORY / a lease's state
    const char* type = word(q);
    q = skip_word(type);
    q = skip_word(q);                          // pid
    q = skip_word(q);                          // dev:ino
    const char* start = word(q);
    q = skip_word(start);
    const char* end = word(q);
    p = end;
    LockRecord r{fd, 0, starts(type, "WRITE") ? 1u : 0u, 0, number(start), 0};
    if (starts(kind, "FLOCK")) r.kind = kFlock;
    else if (starts(kind, "POSIX")) r.kind = kPosix;
    else if (starts(kind, "OFDLCK")) r.kind = kOfd;
    if (r.kind == 0 || !(starts(type, "WRITE") || starts(type, "READ"))) {
      Msg(why, why_cap).s("a file holding a ").s(r.kind ? "lock of type " : "lease or lock of kind ")
          .s(r.kind ? type : kind).s(" (revive restores flock, POSIX and OFD read/write locks only)");
      return -1;
    }
    r.len = starts(end, "EOF") ? 0 : number(end) - r.start + 1;
    if (n == cap) {
      Msg(why, why_cap).s("a file among more than ").i(cap).s(" locks");
      return -1;
    }
    out[n++] = r;
  }
  return n;
}

int file_lock_take(const LockRecord& r) {
  if (r.kind == kFlock) return flock(r.fd, (r.write ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 ? 0 : errno;
  struct flock fl = {};
  fl.l_type = static_cast<short>(r.write ? F_WRLCK : F_RDLCK);
  fl.l_whence = SEEK_SET;
  fl.l_start = r.start;
  fl.l_len = r.len;
  return fcntl(r.fd, r.kind == kPosix ? F_SETLK : F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

const char* file_lock_kind_name(uint32_t k) { return k == kFlock ? "flock" : k == kPosix ? "POSIX lock" : "OFD lock"; }

}  // namespace revive::plugins
