// inotify instances (`tail -f`, file watchers). The kernel keeps each watch's inode and mask but never the
// path it was added by, and a restart must add every watch again under the same watch descriptor (the
// program keeps its own wd -> file map). So:
// - the wrappers below record the absolute path of every inotify_add_watch, inside one of the engine's
//   critical sections: a checkpoint never sees a watch the kernel has and the table lacks;
// - save takes the kernel's list (fdinfo: wd, inode, device, mask) and finds each watch's path in the
//   table, checking that the path still names that inode; a watch whose file was renamed or deleted since
//   is added again through a descriptor of the process that holds the file (/proc/self/fd/N); one found
//   neither way fails the checkpoint, naming it;
// - events the program has not read yet cannot be put back into a new instance, so an instance with
//   events queued is refused for now (the coordinator takes the checkpoint again a moment later: a program
//   that reads its events, as tail does, is between two of them);
// - restore makes the instance and, once every descriptor is back, adds the watches in wd order, advancing
//   the kernel's wd counter (it hands out last + 1, never a freed one) with add+remove pairs on a private
//   memfd where the program had removed watches, up to the next wd the program would have got; then it
//   drains the queue those removals filled (the program had no events queued at the checkpoint).
// The table lives in the program's memory (an mmap'd arena), so a restored process has it as it was.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "plugins/common/engine_section.h"
#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/common/proc_fds.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/common/fdinfo.h"
#include "plugins/plugins.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

// ---- the table (wrapper side: user threads, never the checkpoint's signal context) ----

constexpr uint32_t kLookupFlags = IN_DONT_FOLLOW | IN_ONLYDIR;

struct Entry {
  int32_t fd, wd;
  uint32_t lookup;    // IN_DONT_FOLLOW / IN_ONLYDIR as the program gave them
  uint32_t live;      // 0: removed, replaced by a later add of the same wd, or its instance closed
  uint32_t path_len;  // the path's bytes follow the entry, padded to 8
  uint32_t pad;
};

struct Arena {
  size_t cap, used;  // bytes after the header
};

Arena* g_arena;
int g_lock;  // the pid of the holder (a parent's lock seen after fork is taken over), 0 free

constexpr int kHiFds = 4096;
int32_t g_hi[kHiFds];  // highest wd handed out per inotify descriptor number (0: none seen)

size_t entry_size(uint32_t path_len) { return (sizeof(Entry) + path_len + 7) & ~size_t{7}; }
char* first(Arena* a) { return reinterpret_cast<char*>(a + 1); }

template <typename F>
void each_entry(Arena* a, F f) {
  if (!a) return;
  for (size_t off = 0; off < a->used;) {
    auto* e = reinterpret_cast<Entry*>(first(a) + off);
    f(e, reinterpret_cast<const char*>(e + 1));
    off += entry_size(e->path_len);
  }
}

void lock() {
  const int me = static_cast<int>(syscall(SYS_getpid));
  for (;;) {
    int held = __atomic_load_n(&g_lock, __ATOMIC_RELAXED);
    // Free, or held by the thread of a parent that forked us while it held it (gone here).
    if ((held == 0 || held != me) && __atomic_compare_exchange_n(&g_lock, &held, me, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return;
    __builtin_ia32_pause();
  }
}
void unlock() { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

// Room for `need` more bytes: a new arena twice as large holding the live entries only. false: no memory
// (the watch stays unrecorded; a checkpoint then refuses that instance, naming the watch).
bool reserve(size_t need) {
  if (g_arena && g_arena->cap - g_arena->used >= need) return true;
  size_t live = 0;
  each_entry(g_arena, [&](Entry* e, const char*) { live += e->live ? entry_size(e->path_len) : 0; });
  size_t cap = 64 << 10;
  while (cap < 2 * (live + need)) cap *= 2;
  void* m = mmap(nullptr, sizeof(Arena) + cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  auto* a = static_cast<Arena*>(m);
  a->cap = cap;
  a->used = 0;
  each_entry(g_arena, [&](Entry* e, const char*) {
    if (!e->live) return;
    memcpy(first(a) + a->used, e, entry_size(e->path_len));
    a->used += entry_size(e->path_len);
  });
  // Nobody reads the old arena now: the checkpoint waits for every thread to leave the critical section.
  if (g_arena) munmap(g_arena, sizeof(Arena) + g_arena->cap);
  g_arena = a;
  return true;
}

void forget(int fd, int wd) {  // wd < 0: every watch of fd
  each_entry(g_arena, [&](Entry* e, const char*) {
    if (e->fd == fd && (wd < 0 || e->wd == wd)) e->live = 0;
  });
}

void record(int fd, int wd, const char* path, uint32_t mask) {
  char abs[PATH_MAX];
  size_t len = strnlen(path, PATH_MAX);
  if (path[0] != '/' && getcwd(abs, sizeof abs)) {
    size_t n = strlen(abs);
    if (n + 1 + len < sizeof abs) {
      abs[n] = '/';
      memcpy(abs + n + 1, path, len);
      len += n + 1;
      path = abs;
    }
  }
  lock();
  forget(fd, wd);  // the same inode added again: same wd, the newest path
  if (reserve(entry_size(static_cast<uint32_t>(len)))) {
    auto* e = reinterpret_cast<Entry*>(first(g_arena) + g_arena->used);
    *e = Entry{fd, wd, mask & kLookupFlags, 1, static_cast<uint32_t>(len), 0};
    memcpy(e + 1, path, len);
    g_arena->used += entry_size(e->path_len);
  }
  if (fd >= 0 && fd < kHiFds && wd > g_hi[fd]) g_hi[fd] = wd;
  unlock();
}

void new_instance(int fd) {
  lock();
  forget(fd, -1);
  if (fd >= 0 && fd < kHiFds) g_hi[fd] = 0;
  unlock();
}

using InitFn = int (*)(int);
using AddFn = int (*)(int, const char*, uint32_t);
using RmFn = int (*)(int, int);
InitFn g_init1;
AddFn g_add;
RmFn g_rm;

}  // namespace
}  // namespace revive::plugins

using namespace revive::plugins;

REVIVE_EXPORT int inotify_init1(int flags) noexcept {
  auto f = next_or_enosys(&g_init1, "inotify_init1");
  if (!f) return -1;
  EngineSection section;
  int fd = f(flags);
  if (fd >= 0) {
    int e = errno;
    new_instance(fd);
    errno = e;
  }
  return fd;
}

REVIVE_EXPORT int inotify_init() noexcept { return inotify_init1(0); }

REVIVE_EXPORT int inotify_add_watch(int fd, const char* path, uint32_t mask) noexcept {
  auto f = next_or_enosys(&g_add, "inotify_add_watch");
  if (!f) return -1;
  EngineSection section;
  int wd = f(fd, path, mask);
  if (wd >= 0 && path) {
    int e = errno;
    record(fd, wd, path, mask);
    errno = e;
  }
  return wd;
}

REVIVE_EXPORT int inotify_rm_watch(int fd, int wd) noexcept {
  auto f = next_or_enosys(&g_rm, "inotify_rm_watch");
  if (!f) return -1;
  EngineSection section;
  int rc = f(fd, wd);
  if (rc == 0) {
    int e = errno;
    lock();
    forget(fd, wd);
    unlock();
    errno = e;
  }
  return rc;
}

namespace revive::plugins {
namespace {

// ---- save (the checkpoint thread; no allocation) ----

struct KernelWatch {
  int32_t wd;
  uint32_t mask;
  uint64_t ino;
  uint64_t sdev;  // the kernel's dev_t: major << 20 | minor
};
constexpr int kMaxWatches = 8192;
KernelWatch g_kw[kMaxWatches];
char g_info[1 << 20];            // fdinfo of one instance: ~130 bytes a watch
alignas(8) char g_payload[2 << 20];  // the record's content: InotifyHead, then each watch and its path

bool same_inode(const struct stat& st, const KernelWatch& k) {
  return st.st_ino == k.ino && major(st.st_dev) == (k.sdev >> 20) && minor(st.st_dev) == (k.sdev & 0xfffff);
}

uint64_t field(const char* line, const char* key, int base, bool* ok) {
  const char* p = strstr(line, key);
  uint64_t v = 0;
  if (!p || !fdinfo_parse(p + strlen(key), base, &v)) *ok = false;
  return v;
}

// The kernel's watches of fd in ascending wd order; their count, or -1 (unreadable or too many).
int kernel_watches(int fd) {
  if (!fdinfo_load(fd, g_info, sizeof g_info) || strlen(g_info) + 1 >= sizeof g_info) return -1;
  int n = 0;
  for (const char* p = g_info; (p = strstr(p, "inotify wd:")); ) {
    const char* end = strchr(p, '\n');
    char line[256];
    size_t len = end ? static_cast<size_t>(end - p) : strlen(p);
    if (len >= sizeof line) len = sizeof line - 1;
    memcpy(line, p, len);
    line[len] = '\0';
    bool ok = true;
    KernelWatch k{};
    k.wd = static_cast<int32_t>(field(line, "wd:", 16, &ok));  // hex, as every field of the line
    k.ino = field(line, " ino:", 16, &ok);
    k.sdev = field(line, " sdev:", 16, &ok);
    k.mask = static_cast<uint32_t>(field(line, " mask:", 16, &ok));
    if (!ok || n == kMaxWatches) return -1;
    // Insertion in wd order (the kernel lists them newest first).
    int i = n++;
    while (i > 0 && g_kw[i - 1].wd > k.wd) {
      g_kw[i] = g_kw[i - 1];
      --i;
    }
    g_kw[i] = k;
    p += len;
  }
  return n;
}

// The table's path for watch k of fd: the newest live entry of (fd, wd), or of wd under another number
// (a dup of the instance), whose path still names the watched inode.
const Entry* path_of(int fd, const KernelWatch& k, const Entry** stale) {
  const Entry* found = nullptr;
  for (int pass = 0; pass < 2 && !found; ++pass) {
    each_entry(g_arena, [&](Entry* e, const char* path) {
      if (!e->live || e->wd != k.wd || (pass == 0) != (e->fd == fd)) return;
      char p[PATH_MAX];
      if (e->path_len >= sizeof p) return;
      memcpy(p, path, e->path_len);
      p[e->path_len] = '\0';
      struct stat st;
      int rc = (e->lookup & IN_DONT_FOLLOW) ? lstat(p, &st) : stat(p, &st);
      if (rc == 0 && same_inode(st, k)) found = e;
      else if (pass == 0) *stale = e;
    });
  }
  return found;
}

// A descriptor of this process (not the instance, not the engine's) open on the watched inode, or -1.
int holder_of(int self, const KernelWatch& k) {
  static int fds[4096];
  int n = list_fds(0, fds, 4096);
  for (int i = 0; i < n; ++i) {
    struct stat st;
    if (fds[i] == self || inject::fd_reserved(fds[i])) continue;  // list_fds leaves out plugin-owned ones
    if (fstat(fds[i], &st) == 0 && same_inode(st, k)) return fds[i];
  }
  return -1;
}

// ---- restore ----

struct Pending {
  int fd;
  uint32_t off, len;  // its payload in g_restore_buf
};
constexpr int kMaxInstances = 256;
Pending g_pending[kMaxInstances];
int g_npending;
alignas(8) char g_restore_buf[2 << 20];
uint32_t g_restore_used;

int fail_watch(RestoreCtx& c, int fd, int32_t wd, const char* path, const char* what, int e) {
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(fd).s(" (inotify): watch ").i(wd).s(" on '").s(path)
      .s("': ").s(what).s(": ").err(e), e);
}

}  // namespace

namespace {

// A path another holder of a shared instance published for watch k (key shared + wd): copied into out
// (lookup flags in *lookup) when it still names the watched inode. The owner waits for it a while: the
// holders save at the same time, and one that added the watch publishes it as it saves. *waited_in_vain:
// once a wait found nothing (no other holder, or none that knows), later watches are only looked up, so
// an instance with many watches nobody can name fails at once, not after 3 s for each.
bool path_from_holders(const char* shared, const KernelWatch& k, char* out, size_t cap, uint32_t* lookup,
                       bool* waited_in_vain) {
  char key[192], val[PATH_MAX + 24];
  Msg(key, sizeof key).s(shared).i(k.wd);
  if (inject::coord_lookup(key, !*waited_in_vain, 3000, val, sizeof val) != 1) {
    *waited_in_vain = true;
    return false;
  }
  uint32_t flags = 0;
  const char* p = val;
  for (; *p >= '0' && *p <= '9'; ++p) flags = flags * 10 + uint32_t(*p - '0');
  if (*p++ != '.' || *p != '/' || strlen(p) >= cap) return false;
  struct stat st;
  int rc = (flags & IN_DONT_FOLLOW) ? lstat(p, &st) : stat(p, &st);
  if (rc != 0 || !same_inode(st, k)) return false;
  memcpy(out, p, strlen(p) + 1);
  *lookup = flags & kLookupFlags;
  return true;
}

}  // namespace

int64_t inotify_state(int fd, const char** content, char* why, size_t why_cap, const char* shared, bool owner) {
  int queued = 0;
  if (ioctl(fd, FIONREAD, &queued) == 0 && queued > 0) {
    Msg(why, why_cap).s("an inotify instance holding ").i(queued)
        .s(" bytes of events the program has not read yet (a new instance cannot be given them)");
    return -EAGAIN;
  }
  int n = kernel_watches(fd);
  if (n < 0) {
    Msg(why, why_cap).s("an inotify instance whose watches revive cannot read (over ").i(kMaxWatches).s(" watches?)");
    return -ENOTSUP;
  }
  InotifyHead head{0, 1, 0};
  size_t used = sizeof head;
  static char told[PATH_MAX];  // a path another holder published (checkpoint thread only)
  bool waited_in_vain = false;
  for (int i = 0; i < n; ++i) {
    const KernelWatch& k = g_kw[i];
    const Entry* stale = nullptr;
    const Entry* e = path_of(fd, k, &stale);
    InotifyWatch w{k.wd, k.mask, e ? e->lookup : 0, -1, 0, 0};
    char via[48];
    const char* path = e ? reinterpret_cast<const char*>(e + 1) : nullptr;
    if (e && shared && !owner) {
      // Another process restores the instance: it learns this watch's path from us.
      char key[192], val[PATH_MAX + 24];
      Msg(key, sizeof key).s(shared).i(k.wd);
      Msg v(val, sizeof val);
      v.u(e->lookup).s(".");
      if (e->path_len + v.size() + 1 < sizeof val) {
        memcpy(val + v.size(), path, e->path_len);
        val[v.size() + e->path_len] = '\0';
        inject::coord_publish(key, val);  // lost coordinator: the checkpoint fails anyway
      }
    }
    uint32_t told_lookup = 0;
    if (e) {
      w.path_len = e->path_len;
    } else if (shared && !owner) {
      continue;  // not ours to name: the owner's list is the one restored (its holders told it)
    } else if ((w.via_fd = holder_of(fd, k)) >= 0) {
      // Renamed or deleted since it was watched, but open here: the restored descriptor is that file.
      Msg m(via, sizeof via);
      m.s("/proc/self/fd/").i(w.via_fd);
      path = via;
      w.path_len = static_cast<uint32_t>(m.size());
    } else if (shared && !stale && path_from_holders(shared, k, told, sizeof told, &told_lookup, &waited_in_vain)) {
      // Added by another holder of the instance (after a fork), which told us its path (one we added
      // ourselves and whose file was renamed since, stale, is nobody else's to name).
      path = told;
      w.lookup = told_lookup;
      w.path_len = static_cast<uint32_t>(strlen(told));
    } else {
      Msg m(why, why_cap);
      m.s("an inotify instance with watch ").i(k.wd).s(" on inode ").u(k.ino).s(" (device ").u(k.sdev >> 20).s(":")
          .u(k.sdev & 0xfffff).s(")");
      if (stale) {
        char p[PATH_MAX];
        size_t l = stale->path_len < sizeof p ? stale->path_len : sizeof p - 1;
        memcpy(p, stale + 1, l);
        p[l] = '\0';
        m.s(", added as '").s(p).s("', which now names another file or nothing, and no descriptor of the process holds it");
      } else {
        m.s(" that revive did not see added (made before an exec, or by a raw system call");
        m.s(shared ? ", and no other holder of the instance named it)" : ")");
      }
      return -ENOTSUP;
    }
    if (used + sizeof w + w.path_len > sizeof g_payload) {
      Msg(why, why_cap).s("an inotify instance whose watches' paths exceed ").u(sizeof g_payload).s(" bytes");
      return -ENOTSUP;
    }
    memcpy(g_payload + used, &w, sizeof w);
    memcpy(g_payload + used + sizeof w, path, w.path_len);
    used += sizeof w + w.path_len;
    ++head.count;
    if (k.wd >= head.next_wd) head.next_wd = k.wd + 1;
  }
  if (fd < kHiFds && g_hi[fd] >= head.next_wd) head.next_wd = g_hi[fd] + 1;
  memcpy(g_payload, &head, sizeof head);
  *content = g_payload;
  return static_cast<int64_t>(used);
}

void inotify_reset() {
  g_npending = 0;
  g_restore_used = 0;
}

namespace {
// Reads and checks rec's watch list and queues it for inotify_rearm on the instance `fd` (to be placed at
// rec.fd; -1: none made yet). 0, or fail()'s value (fd closed) when the list is malformed or too much.
int queue_watches(RestoreCtx& c, const FdRecord& rec, int fd);
}  // namespace

int restore_inotify(RestoreCtx& c, const FdRecord& rec, const char* path) {
  const uint64_t len = static_cast<uint64_t>(rec.content_len);
  if (len < sizeof(InotifyHead) || g_npending == kMaxInstances || len > sizeof g_restore_buf - g_restore_used)
    return queue_watches(c, rec, -1);  // says what is wrong, before anything is made
  // Raw call: the instance's table entries are the restored program's own already.
  int fd = static_cast<int>(syscall(SYS_inotify_init1, IN_CLOEXEC | (rec.flags & O_NONBLOCK ? IN_NONBLOCK : 0)));
  if (fd < 0) return stand_in(c, rec, path, "cannot be recreated");
  if (int rc = queue_watches(c, rec, fd); rc != 0) return rc;
  return place(c, fd, rec);
}

int restore_shared_inotify(RestoreCtx& c, const FdRecord& rec, int inherited) {
  const bool owner = rec.share_pid == static_cast<uint32_t>(fd_saved_self()) && rec.share_fd == rec.fd;
  if (!owner && rec.content_len > 0 && !c.in.skip(static_cast<size_t>(rec.content_len)))
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (inotify): truncated state"), EINVAL);
  int fd = fcntl(inherited, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd)
        .s(" (inotify): cannot take the instance handed over by revive restart: ").err(errno), errno);
  if (owner)
    if (int rc = queue_watches(c, rec, fd); rc != 0) return rc;
  return place(c, fd, rec);
}

namespace {
int queue_watches(RestoreCtx& c, const FdRecord& rec, int fd) {
  const uint64_t len = static_cast<uint64_t>(rec.content_len);
  auto bad = [&](const char* why) {
    if (fd >= 0) close(fd);
    return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (inotify): ").s(why), EINVAL);
  };
  if (len < sizeof(InotifyHead) || g_npending == kMaxInstances || len > sizeof g_restore_buf - g_restore_used)
    return bad(len < sizeof(InotifyHead) ? "bad state in the section" : "more inotify state than revive restores");
  char* buf = g_restore_buf + g_restore_used;
  if (!c.in.bytes(buf, len)) return bad("truncated state");
  // Check the whole list before anything is made: wds ascending, paths within the record.
  InotifyHead head;
  memcpy(&head, buf, sizeof head);
  uint64_t off = sizeof head;
  int32_t prev = 0;
  for (uint32_t i = 0; i < head.count; ++i) {
    InotifyWatch w;
    if (len - off < sizeof w) break;
    memcpy(&w, buf + off, sizeof w);
    if (w.wd <= prev || w.path_len == 0 || w.path_len >= PATH_MAX || len - off - sizeof w < w.path_len) {
      off = len + 1;
      break;
    }
    prev = w.wd;
    off += sizeof w + w.path_len;
  }
  if (off != len || head.next_wd <= prev) return bad("malformed watch list in the section");
  g_pending[g_npending++] = Pending{rec.fd, g_restore_used, static_cast<uint32_t>(len)};
  g_restore_used += static_cast<uint32_t>((len + 7) & ~uint64_t{7});
  return 0;
}
}  // namespace

int inotify_rearm(RestoreCtx& c) {
  int dummy = -1;
  char dummy_path[48] = "";
  int rc = 0;
  for (int i = 0; i < g_npending && rc == 0; ++i) {
    const Pending& p = g_pending[i];
    const char* buf = g_restore_buf + p.off;
    InotifyHead head;
    memcpy(&head, buf, sizeof head);
    int32_t next = 1;
    // Moves the instance's wd counter to `to` by adding and removing a watch of an inode the program
    // never watches (each removal queues an IN_IGNORED, drained below).
    auto advance = [&](int32_t to) -> int {
      if (next >= to) return 0;
      if (dummy < 0) {
        dummy = static_cast<int>(syscall(SYS_memfd_create, "revive-inotify", MFD_CLOEXEC));
        if (dummy < 0) return fail_watch(c, p.fd, to, "(a private memfd)", "cannot make the placeholder", errno);
        Msg(dummy_path, sizeof dummy_path).s("/proc/self/fd/").i(dummy);
      }
      while (next < to) {
        int d = static_cast<int>(syscall(SYS_inotify_add_watch, p.fd, dummy_path, IN_ATTRIB));
        if (d < 0) return fail_watch(c, p.fd, to, dummy_path, "cannot move the watch counter", errno);
        syscall(SYS_inotify_rm_watch, p.fd, d);
        next = d + 1;
      }
      return 0;
    };
    uint64_t off = sizeof head;
    for (uint32_t k = 0; k < head.count && rc == 0; ++k) {
      InotifyWatch w;
      memcpy(&w, buf + off, sizeof w);
      char wpath[PATH_MAX];
      memcpy(wpath, buf + off + sizeof w, w.path_len);
      wpath[w.path_len] = '\0';
      off += sizeof w + w.path_len;
      if ((rc = advance(w.wd)) != 0) break;
      int got = static_cast<int>(syscall(SYS_inotify_add_watch, p.fd, wpath, w.mask | (w.lookup & kLookupFlags)));
      if (got < 0) rc = fail_watch(c, p.fd, w.wd, wpath, "cannot watch it again", errno);
      else if (got != w.wd) rc = fail_watch(c, p.fd, w.wd, wpath, "came back under another watch descriptor", EEXIST);
      next = got + 1;
    }
    if (rc == 0) rc = advance(head.next_wd);
    // The placeholder's IN_IGNORED events (and whatever the restore's own writes caused): the program had
    // nothing queued at the checkpoint.
    int fl = fcntl(p.fd, F_GETFL);
    fcntl(p.fd, F_SETFL, fl | O_NONBLOCK);
    alignas(8) char drain[4096];
    while (syscall(SYS_read, p.fd, drain, sizeof drain) > 0) {
    }
    fcntl(p.fd, F_SETFL, fl);
  }
  if (dummy >= 0) close(dummy);
  inotify_reset();
  return rc;
}

}  // namespace revive::plugins
