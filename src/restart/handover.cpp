// Handing the process over to the restored engine: the RestartInfo block (environment, plugin sections,
// what to unmap), then the saved threads, each a clone with glibc's pthread_create flags that starts
// directly in its saved engine context, with its saved tid where the kernel allows (clone3 set_tid). This
// thread becomes the saved main thread last.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "image/restart_info.h"
#include "plugins/fd/fd_record.h"
#include "restart/restart.h"

extern "C" long restart_clone(unsigned long flags, uint64_t stack, uint64_t ptid, uint64_t ctid, uint64_t tls,
                              const uint64_t* ctx);
extern "C" long restart_clone3(const void* args, size_t size, const uint64_t* ctx);
extern "C" void restart_jump(const uint64_t* ctx, uint64_t fs_base) __attribute__((noreturn));
extern char** environ;

namespace revive::restart {
namespace {

uint64_t align8(uint64_t x) { return (x + 7) / 8 * 8; }

// clone3's argument block up to set_tid_size (the kernel's CLONE_ARGS_SIZE_VER1); spelled out here because
// <linux/sched.h> and glibc's <sched.h> do not mix.
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size;
};
static_assert(sizeof(CloneArgs) == 80);

// Starts saved thread t. First with clone3 and set_tid = its saved tid, so a tid the program stored
// (gettid, then tgkill, /proc/self/task/TID, sched_setaffinity, F_SETOWN_EX...) names the same thread
// again; that needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE over the pid namespace and a free tid. Else
// (or once *set_tid_err says it cannot work here) a plain clone with a new tid: the kernel writes the new
// tid into glibc's struct pthread through CLONE_PARENT_SETTID either way, so pthread_kill/join still work.
// Returns the new tid or -errno of the plain clone; *kept tells which of the two ran.
long start_thread(const image::ThreadRecord& t, unsigned long flags, int* set_tid_err, bool* kept) {
  *kept = false;
  if (*set_tid_err == 0 || *set_tid_err == EEXIST) {
    pid_t want = pid_t(t.tid);
    CloneArgs a;
    memset(&a, 0, sizeof a);
    a.flags = flags;
    a.parent_tid = t.tid_addr;
    a.child_tid = t.tid_addr;
    a.tls = t.fs_base;
    // clone3 takes the stack's base and size (the kernel starts the child at base + size): the child
    // starts at the saved stack pointer, as with clone, and switches to its saved context before it
    // touches the stack.
    a.stack = t.ctx[6] - 64;
    a.stack_size = 64;
    a.set_tid = reinterpret_cast<uint64_t>(&want);
    a.set_tid_size = 1;
    long r = restart_clone3(&a, sizeof a, t.ctx);
    if (r >= 0) {
      *kept = true;
      return r;
    }
    // EEXIST is this tid's problem only (taken by another process): the next thread may still get its own.
    *set_tid_err = int(-r);
  }
  return restart_clone(flags, t.ctx[6], t.tid_addr, t.tid_addr, t.fs_base, t.ctx);
}

// The fd plugin's hand-over prefix (plugins/fd/fd_record.h: kHandOverTag), prepended to its section in the
// blob: the program's executable, opened here to become /proc/self/exe again (which the kernel refuses
// while this restarter is still mapped, so the fd plugin does it after the engine unmapped us, with
// PR_SET_MM_MAP's exe_fd: CAP_CHECKPOINT_RESTORE, else PR_SET_MM_EXE_FILE: CAP_SYS_RESOURCE), and the shared open
// file descriptions the tree's skeleton handed down (REVIVE_FD_SHARED="fd:inherited,...", tree_spawn.cpp).
struct FdPrefix {
  int32_t exe_fd = -1;
  uint32_t n = 0;
  plugins::FdHandOver items[plugins::kMaxHandOver];
  uint64_t bytes() const { return 4 + 4 + 4 + g_mm_map_len + 4 + uint64_t(n) * sizeof(plugins::FdHandOver); }
  void write(uint8_t* p) const {
    memcpy(p, plugins::kHandOverTag, 4);
    memcpy(p + 4, &exe_fd, 4);
    memcpy(p + 8, &g_mm_map_len, 4);
    memcpy(p + 12, g_mm_map, g_mm_map_len);
    p += 12 + g_mm_map_len;
    memcpy(p, &n, 4);
    memcpy(p + 4, items, n * sizeof(plugins::FdHandOver));
  }
};
FdPrefix g_fd_prefix;

// Parses REVIVE_FD_SHARED; a malformed entry is dropped with a warning (that descriptor is then reopened
// by path, with an offset of its own).
void read_fd_shared() {
  const char* v = getenv("REVIVE_FD_SHARED");
  for (const char* p = v; p && *p;) {
    char* end = nullptr;
    long fd = strtol(p, &end, 10);
    long inh = -1;
    if (end != p && *end == ':') {
      const char* q = end + 1;
      inh = strtol(q, &end, 10);
      if (end == q) inh = -1;
    }
    if (fd < 0 || inh < 0 || fd > INT32_MAX || inh > INT32_MAX || (*end && *end != ',') ||
        g_fd_prefix.n == plugins::kMaxHandOver) {
      fprintf(stderr, "revive-restart: ignoring malformed REVIVE_FD_SHARED '%s'\n", v);
      g_fd_prefix.n = 0;
      return;
    }
    g_fd_prefix.items[g_fd_prefix.n++] = plugins::FdHandOver{int32_t(fd), int32_t(inh)};
    p = *end ? end + 1 : end;
  }
  unsetenv("REVIVE_FD_SHARED");  // not part of the restored engine's REVIVE_* environment
}

// The fd section's deleted files that live on as shared memory (FdRecord::stored == kStoredInShm): each gets the object
// restore_memory() mapped at the saved address, on a descriptor above every saved one (the fd plugin puts
// the saved ones back by number first), as an FdHandOver. The section is the image's, already checked by
// the view; a record that does not parse ends the walk (the fd plugin then reports it).
void hand_shm_objects(const image::View& v, const image::SectionEntry& s) {
  const uint8_t* p = v.base + s.offset;
  const uint8_t* end = p + s.length;
  if (s.length < 12 || memcmp(p, plugins::kFdTag, 4) != 0) return;
  uint32_t count;
  memcpy(&count, p + 8, 4);
  p += 12;
  struct Want {
    int32_t fd;
    uint64_t at;
  };
  static Want want[plugins::kMaxHandOver];
  uint32_t nwant = 0;
  int top = 2;
  for (uint32_t k = 0; k < count; ++k) {
    plugins::FdRecord rec;
    uint32_t plen;
    if (size_t(end - p) < sizeof rec + 4) return;
    memcpy(&rec, p, sizeof rec);
    memcpy(&plen, p + sizeof rec, 4);
    p += sizeof rec + 4;
    if (rec.content_len < 0 || uint64_t(end - p) < plen || uint64_t(end - p) - plen < uint64_t(rec.content_len)) return;
    p += plen;
    if (rec.stored == plugins::kStoredInShm && rec.content_len == 8 && nwant < plugins::kMaxHandOver) {
      uint64_t at;
      memcpy(&at, p, 8);
      want[nwant++] = Want{rec.fd, at};
    }
    p += rec.content_len;
    if (rec.fd > top) top = rec.fd;
  }
  for (uint32_t i = 0; i < g_fd_prefix.n; ++i)
    if (g_fd_prefix.items[i].inherited > top) top = g_fd_prefix.items[i].inherited;
  uint32_t nobj;
  const MappedObject* obj = mapped_objects(&nobj);
  for (uint32_t w = 0; w < nwant && g_fd_prefix.n < plugins::kMaxHandOver; ++w)
    for (uint32_t o = 0; o < nobj; ++o) {
      if (obj[o].start != want[w].at) continue;
      int fd = fcntl(obj[o].fd, F_DUPFD_CLOEXEC, top + 1);
      if (fd >= 0) {
        g_fd_prefix.items[g_fd_prefix.n++] = plugins::FdHandOver{want[w].fd, fd};
        top = fd;
      }
      break;
    }
  for (uint32_t o = 0; o < nobj; ++o) close(obj[o].fd);
}

// Everything of ours that is neither restored memory, nor a special mapping, nor the blob: to unmap.
uint32_t collect_unmap(const image::View& v, uint64_t blob, uint64_t blob_len, uint64_t (*out)[2], uint32_t cap) {
  static Range own[kMaxOwn];
  long n = read_own_maps(own, kMaxOwn);
  uint32_t k = 0;
  for (long i = 0; i < n; ++i) {
    if (strncmp(own[i].name, "[vdso]", 6) == 0 || strncmp(own[i].name, "[vvar", 5) == 0 ||
        strncmp(own[i].name, "[vsyscall]", 10) == 0)
      continue;
    // Subtract restored regions and the blob (the kernel may have merged neighbours into one line).
    uint64_t s = own[i].start;
    const uint64_t end = own[i].end;
    while (s < end) {
      uint64_t e = end;
      bool skip = false;
      auto cut = [&](uint64_t a, uint64_t b) {
        if (a <= s && s < b) {
          s = b < end ? b : end;
          skip = true;
        } else if (s < a && a < e) {
          e = a;
        }
      };
      for (uint32_t r = 0; r < v.region_count && !skip; ++r) cut(v.regions[r].start, v.regions[r].end);
      if (!skip) cut(blob, blob + blob_len);
      if (skip) continue;
      if (k < cap) {
        out[k][0] = s;
        out[k][1] = e;
        ++k;
      }
      s = e;
    }
  }
  return k;
}

}  // namespace

bool hand_over(const image::View& v, const char* image_path, bool lazy, char* err, size_t err_len) {
  // Blob: REVIVE_* environment, plugin sections, image path.
  read_fd_shared();
  char exe[sizeof v.process->exe + 1];
  memcpy(exe, v.process->exe, sizeof v.process->exe);
  exe[sizeof v.process->exe] = 0;
  g_fd_prefix.exe_fd = exe[0] == '/' ? open(exe, O_RDONLY | O_CLOEXEC) : -1;
  auto is_fd = [](const image::SectionEntry& s) { return s.kind == image::kKindPlugin && strcmp(s.name, "fd") == 0; };
  for (uint32_t i = 0; i < v.dir_count; ++i)
    if (is_fd(v.dir[i]) && v.dir[i].version >= 5 && v.dir[i].version <= plugins::kFdVersion)
      hand_shm_objects(v, v.dir[i]);
  uint64_t env_len = 1, plug_len = 0;
  for (char** e = environ; *e; ++e)
    if (strncmp(*e, "REVIVE_", 7) == 0) env_len += strlen(*e) + 1;
  for (uint32_t i = 0; i < v.dir_count; ++i)
    if (v.dir[i].kind == image::kKindPlugin)
      plug_len += sizeof(image::PluginBlob) + align8(v.dir[i].length + (is_fd(v.dir[i]) ? g_fd_prefix.bytes() : 0));
  uint64_t path_len = strlen(image_path) + 1;
  uint64_t blob_len = (align8(env_len) + plug_len + path_len + 4095) / 4096 * 4096;
  auto* blob = static_cast<uint8_t*>(mmap(nullptr, blob_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (blob == MAP_FAILED) {
    snprintf(err, err_len, "cannot map %llu bytes for the hand-over: %s", (unsigned long long)blob_len, strerror(errno));
    return false;
  }
  image::RestartInfo ri;
  memset(&ri, 0, sizeof ri);
  ri.blob_addr = reinterpret_cast<uint64_t>(blob);
  ri.blob_len = blob_len;
  uint64_t off = 0;
  ri.env_off = 0;
  for (char** e = environ; *e; ++e)
    if (strncmp(*e, "REVIVE_", 7) == 0) {
      size_t l = strlen(*e) + 1;
      memcpy(blob + off, *e, l);
      off += l;
    }
  blob[off++] = 0;
  ri.env_len = off;
  off = align8(off);
  ri.plugins_off = off;
  for (uint32_t i = 0; i < v.dir_count; ++i) {
    const image::SectionEntry& s = v.dir[i];
    if (s.kind != image::kKindPlugin) continue;
    image::PluginBlob h;
    memset(&h, 0, sizeof h);
    memcpy(h.name, s.name, sizeof h.name);
    h.version = s.version;
    const uint64_t pre = is_fd(s) ? g_fd_prefix.bytes() : 0;
    h.length = pre + s.length;
    memcpy(blob + off, &h, sizeof h);
    if (pre) g_fd_prefix.write(blob + off + sizeof h);
    memcpy(blob + off + sizeof h + pre, v.base + s.offset, s.length);
    off += sizeof h + align8(h.length);
  }
  ri.plugins_len = off - ri.plugins_off;
  ri.image_path_off = off;
  memcpy(blob + off, image_path, path_len);
  ri.lazy = lazy;
  ri.magic = image::kRestartInfoMagic;

  // The saved thread this (leader) thread becomes: the saved leader, else the checkpoint thread.
  const image::ThreadRecord* self = nullptr;
  for (uint32_t i = 0; i < v.thread_count; ++i)
    if (v.threads[i].is_main) self = &v.threads[i];
  for (uint32_t i = 0; i < v.thread_count && !self; ++i)
    if (v.threads[i].is_ckpt) self = &v.threads[i];
  if (!self) {
    snprintf(err, err_len, "no thread to continue");
    return false;
  }

  // From here on no more allocations: the unmap list must describe our final layout.
  ri.unmap_count = collect_unmap(v, ri.blob_addr, blob_len, ri.unmap, image::kMaxUnmap);
  auto* dst = reinterpret_cast<image::RestartInfo*>(v.process->restart_info_addr);
  memcpy(dst, &ri, sizeof ri);

  const char* log = getenv("REVIVE_LOG");
  const bool verbose = log && atoi(log) >= 1;
  sigset_t all;
  sigfillset(&all);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, nullptr, 8);
  // Our own rseq area is about to be unmapped: the kernel must stop updating it.
  if (__rseq_size > 0) {
    auto* area = reinterpret_cast<char*>(__builtin_thread_pointer()) + __rseq_offset;
    syscall(SYS_rseq, area, __rseq_size < 32 ? 32 : __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
  }
  const unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                              CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  // REVIVE_RESTART_NO_SET_TID=1 takes the fallback as if unprivileged, so tests can cover it.
  int set_tid_err = getenv("REVIVE_RESTART_NO_SET_TID") ? EPERM : 0;
  // With a virtual-pid table (REVIVE_VPID_TABLE, plugins/proctree/tree_vpid.cpp) this process came back
  // with a new pid and its threads' saved tids are seen through the table: asking the kernel for them
  // again gains nothing and takes them from whoever else needs them. Two copies of one checkpoint
  // restarted side by side: the first keeps its own ids, the second goes virtual, and the second's
  // threads used to win the race for the first's tids, so a thread of the first came back with a new
  // gettid() (proctree.ids_side_by_side, "tid 13697/13639").
  const bool virtual_ids = getenv("REVIVE_VPID_TABLE") != nullptr;  // vpid::kEnv
  if (virtual_ids) set_tid_err = EINVAL;
  uint32_t lost = 0;
  uint64_t first_lost = 0;
  int first_err = 0;
  for (uint32_t i = 0; i < v.thread_count; ++i) {
    const image::ThreadRecord& t = v.threads[i];
    if (&t == self) continue;
    bool kept = false;
    long r = start_thread(t, flags, &set_tid_err, &kept);
    if (r < 0) {
      // Threads already started are parked in the engine; nothing sane to continue with.
      snprintf(err, err_len, "clone for saved thread %llu failed: %s", (unsigned long long)t.tid, strerror(int(-r)));
      return false;
    }
    if (!kept && lost++ == 0) {
      first_lost = t.tid;
      first_err = set_tid_err;
    }
  }
  // Never a reason to fail the restart: said once, and only when asked for (the program's stderr is ours
  // until the fd plugin restores its descriptors). No stdio: nothing may allocate now.
  if (lost && verbose) {
    char line[256];
    const char* why = first_err == EPERM    ? "needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE"
                      : first_err == EEXIST ? "tid taken by another process"
                      : first_err == ENOSYS ? "no clone3 in this kernel"
                      : virtual_ids         ? "not asked: virtual pids"
                                            : "refused";
    int n = snprintf(line, sizeof line,
                     "revive-restart: %u thread(s) got new tids (saved tid %llu: clone3 set_tid: %s, errno %d)\n",
                     lost, (unsigned long long)first_lost, why, first_err);
    if (n > 0) (void)!write(2, line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1);
  }
  syscall(SYS_set_tid_address, self->tid_addr);
  *reinterpret_cast<volatile int*>(self->tid_addr) = int(syscall(SYS_gettid));
  restart_jump(self->ctx, self->fs_base);
}

}  // namespace revive::restart
