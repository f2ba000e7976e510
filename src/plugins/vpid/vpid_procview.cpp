// The ids inside /proc/<pid>/stat and /proc/<pid>/status (also of /proc/self, /proc/thread-self and
// .../task/<tid>/), and in a thread's children list (.../task/<tid>/children, /proc/thread-self/children),
// as the program knows them, while a virtual-pid table is mapped. The open wrappers
// (vpid_proc.cpp) read the kernel's file, rewrite its ids (stat fields 1 pid, 4 ppid, 5 pgrp,
// 6 session, 8 tpgid; status Tgid, Pid, PPid, TracerPid, and the first id of NStgid, NSpid, NSpgid,
// NSsid: the one in our namespace) and give the program a sealed, read-only memfd holding the text at
// offset 0. The memfd is named "revive-proc:<path as the program named it>", so the fd plugin records
// the /proc path (fd_save.cpp) and a restart opens it again through these wrappers: fresh contents,
// as for any /proc file. A snapshot: reading it again (pread at 0) gives the same text, where the
// kernel's file would be generated anew (the program must open it again for new values).
// Raw system calls and stack buffers only: the fd plugin's restore opens such paths with user threads held.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "inject/sys.h"
#include "plugins/common/msg.h"
#include "plugins/vpid/vpid.h"

namespace revive::vpid {
namespace {
using revive::inject::sys::sc;
using revive::plugins::Msg;

constexpr char kMemfdPrefix[] = "revive-proc:";
constexpr size_t kText = 4096;  // /proc/PID/status is about 1.5 KiB; larger: left as the kernel's

// Whether `path` (the program's) names a stat (1), status (2) or children (3) file of a process or thread: /proc/
// then self, thread-self or a number, then /task/<number> (not after thread-self), then the file name.
int view_kind(const char* path) {
  if (strncmp(path, "/proc/", 6) != 0) return 0;
  const char* p = path + 6;
  auto digits = [&p] {
    const char* q = p;
    while (*p >= '0' && *p <= '9') ++p;
    return p > q;
  };
  bool thread = false;
  if (strncmp(p, "self/", 5) == 0) p += 4;
  else if (strncmp(p, "thread-self/", 12) == 0) p += 11, thread = true;
  else if (!digits()) return 0;
  if (!thread && strncmp(p, "/task/", 6) == 0) {
    p += 6;
    if (!digits()) return 0;
  }
  if (strcmp(p, "/stat") == 0) return 1;
  if (strcmp(p, "/status") == 0) return 2;
  if (strcmp(p, "/children") == 0) return 3;  // the kernel has it under task/<tid>/ only: else its error
  return 0;
}

// Bounded text output; ok turns false when the text does not fit.
struct Out {
  char* b;
  size_t cap, len = 0;
  bool ok = true;
  void put(const char* p, size_t n) {
    if (len + n > cap) ok = false;
    if (!ok) return;
    memcpy(b + len, p, n);
    len += n;
  }
  void id(long kernel_id) {  // a kernel id the program sees as its own view of it
    char num[24];
    Msg m(num, sizeof num);
    m.i(kernel_id > 0 ? to_virt(pid_t(kernel_id)) : kernel_id);
    put(num, m.size());
  }
};

// The number at p (optionally negative), its end in *end.
long number(const char* p, const char* lim, const char** end) {
  bool neg = p < lim && *p == '-';
  if (neg) ++p;
  long v = 0;
  while (p < lim && *p >= '0' && *p <= '9' && v < 0x7fffffff) v = v * 10 + (*p++ - '0');
  *end = p;
  return neg ? -v : v;
}

// stat: "pid (comm) state ppid pgrp session tty_nr tpgid ...". comm may hold spaces and parentheses:
// the fields after it start after the last ')'.
bool rewrite_stat(const char* in, size_t n, Out& out) {
  const char* lim = in + n;
  const char* close = nullptr;
  for (const char* p = in; p < lim; ++p)
    if (*p == ')') close = p;
  if (!close) return false;
  const char* p;
  out.id(number(in, close, &p));
  out.put(p, size_t(close + 1 - p));  // " (comm)"
  p = close + 1;
  for (int field = 3; p < lim && *p == ' ' && field <= 8; ++field) {
    out.put(p++, 1);
    const char* e = p;
    while (e < lim && *e != ' ') ++e;
    if (field == 4 || field == 5 || field == 6 || field == 8) {
      const char* q;
      long v = number(p, e, &q);
      if (q != e) return false;
      out.id(v);
    } else {
      out.put(p, size_t(e - p));
    }
    p = e;
  }
  out.put(p, size_t(lim - p));
  return out.ok;
}

// status: the id lines; the NS* lines list one id per nested namespace, ours first.
bool rewrite_status(const char* in, size_t n, Out& out) {
  static const char* const kKeys[] = {"Tgid:", "Pid:", "PPid:", "TracerPid:", "NStgid:", "NSpid:", "NSpgid:", "NSsid:"};
  const char* lim = in + n;
  for (const char* line = in; line < lim;) {
    const char* eol = static_cast<const char*>(memchr(line, '\n', size_t(lim - line)));
    eol = eol ? eol + 1 : lim;
    const char* p = line;
    for (const char* k : kKeys) {
      const size_t kl = strlen(k);
      if (size_t(eol - line) <= kl || memcmp(line, k, kl) != 0) continue;
      p = line + kl;
      while (p < eol && *p == '\t') ++p;
      out.put(line, size_t(p - line));
      const char* q;
      const long v = number(p, eol, &q);
      if (q == p) return false;
      out.id(v);
      p = q;
      break;
    }
    out.put(p, size_t(eol - p));
    line = eol;
  }
  return out.ok;
}

// children: "pid pid ... " (each followed by a space), the thread's children that are alive.
bool rewrite_children(const char* in, size_t n, Out& out) {
  const char* lim = in + n;
  for (const char* p = in; p < lim;) {
    if (*p < '0' || *p > '9') {
      out.put(p++, 1);
      continue;
    }
    const char* q;
    out.id(number(p, lim, &q));
    p = q;
  }
  return out.ok;
}

// A sealed read-only memfd holding text, named after the program's path; -errno.
int sealed_copy(const char* path, const char* text, size_t n, int flags) {
  char name[256];
  Msg m(name, sizeof name);
  m.s(kMemfdPrefix).s(path);
  if (m.size() + 1 >= sizeof name || m.size() > 249) return -ENAMETOOLONG;
  const int mfd = int(sc(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (mfd < 0) return mfd;
  long r = 0;
  for (size_t done = 0; done < n && r >= 0; done += size_t(r)) r = sc(SYS_write, mfd, text + done, n - done);
  if (r >= 0) r = sc(SYS_fcntl, mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  if (r >= 0) {
    // Read-only, as the /proc file: a description of its own, offset 0.
    char self[40];
    Msg(self, sizeof self).s("/proc/self/fd/").i(mfd);
    r = sc(SYS_openat, AT_FDCWD, self, O_RDONLY | (flags & (O_CLOEXEC | O_NONBLOCK)));
  }
  sc(SYS_close, mfd);
  return int(r);
}

}  // namespace

int proc_view(const char* path, const char* real_path, int flags) {
  if (!active() || !path || (flags & O_ACCMODE) != O_RDONLY || (flags & (O_PATH | O_DIRECTORY | O_CREAT)))
    return kNotAView;
  const int kind = view_kind(path);
  if (!kind) return kNotAView;
  const int fd = int(sc(SYS_openat, AT_FDCWD, real_path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return kNotAView;  // opened as usual: the same error
  char in[kText], text[kText + 256];
  size_t n = 0;
  for (long r; n < sizeof in && (r = sc(SYS_read, fd, in + n, sizeof in - n)) > 0;) n += size_t(r);
  sc(SYS_close, fd);
  // Unreadable or larger than expected: the kernel's (an empty children list is the kernel's too: no ids).
  if (n == 0 || n == sizeof in) return kNotAView;
  Out out{text, sizeof text};
  const bool ok = kind == 1 ? rewrite_stat(in, n, out) : kind == 2 ? rewrite_status(in, n, out)
                                                                   : rewrite_children(in, n, out);
  if (!ok) return kNotAView;
  const int v = sealed_copy(path, text, out.len, flags);
  // No memfds here (an old kernel, a seccomp filter) or an overlong path: the kernel's file.
  if (v == -ENOSYS || v == -EPERM || v == -EACCES || v == -ENAMETOOLONG) return kNotAView;
  if (v < 0) {
    errno = -v;
    return -1;
  }
  return v;
}

const char* proc_view_path(const char* link) {
  constexpr char kLink[] = "/memfd:revive-proc:";
  return strncmp(link, kLink, sizeof kLink - 1) == 0 ? link + sizeof kLink - 1 : nullptr;
}

}  // namespace revive::vpid
