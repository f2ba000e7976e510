// Per-process state of virtual ids: which table is mapped, this process's virtual pid, each thread's
// virtual tid, and the translations the wrappers use. Runs in wrappers, at library load, in a fork child
// and in the engine's restore (raw syscalls only there: no allocation, no locks, no stdio).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject/fork_path.h"
#include "inject/plugin.h"
#include "inject/sys.h"
#include "plugins/common/msg.h"
#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_prime.h"

extern "C" const revive::vpid::PrimeSlot __start_revive_vpid_prime[] __attribute__((weak, visibility("hidden")));
extern "C" const revive::vpid::PrimeSlot __stop_revive_vpid_prime[] __attribute__((weak, visibility("hidden")));

// The epoch (vpid.h: epoch()), bumped whenever a table is mapped or forgotten (never 0 while one is
// mapped). A C name: the signal plugin's handler entry reads it in its first instruction (signal_entry.cpp).
extern "C" {
__attribute__((visibility("hidden"))) uint32_t revive_vpid_epoch;
}

namespace revive::vpid {

Table g_table;
pid_t g_vpid;

namespace {

// Initial-exec TLS (the library is preloaded: its block is static, no allocation on first touch).
__thread pid_t t_vtid __attribute__((tls_model("initial-exec")));

char g_path[256];
pid_t g_vpid_real;  // the kernel pid g_vpid was worked out for (a fork child's differs)
int g_read_children;  // may_read_children: 0 not known yet, 1 yes, 2 no
uint64_t g_map_lo, g_map_hi;

// Restored threads waiting for restore() to publish them: (virtual tid, new kernel tid).
constexpr uint32_t kMaxPending = 1100;
uint32_t g_pending[kMaxPending][2];
uint32_t g_npending;

constexpr pid_t kNoSuchPid = 0x7ffffff0;  // above PID_MAX_LIMIT: no process has it

long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return syscall(n, a, b, c, d, e, f);
}

// Inline (inject/sys.h): libc's syscall() is another page for every fork child to fault in.
REVIVE_FORK_PATH pid_t real_pid() { return pid_t(revive::inject::sys::getpid()); }
pid_t real_tid() { return pid_t(raw(SYS_gettid)); }

// The virtual id of a process or thread whose kernel id the kernel just gave it (fork child, new
// thread): its own entry if the table has one (a restored process, an exec'ed one), else the kernel id
// itself unless that is a virtual id in use (then a fresh one, registered).
REVIVE_FORK_PATH pid_t register_new(pid_t real, bool stale_ok) {
  if (uint32_t v = g_table.virt_of(uint32_t(real))) {
    if (!stale_ok) return pid_t(v);
    // A new process or thread: whoever had this kernel id before is gone, its entry is stale.
    g_table.remove_real(uint32_t(real));
  }
  if (g_table.real_of(uint32_t(real)) == 0) return real;
  uint32_t f = g_table.fresh();
  if (!g_table.insert(f, uint32_t(real))) {
    plugins::warn("virtual-pid table full: a new process or thread sees its kernel id, which another "
                  "process of the computation also has as its id");
    return real;
  }
  return pid_t(f);
}

// Maps `path` (raw syscalls). nullptr on success, else what is wrong (err: errno or 0).
const char* map_table(const char* path, int* err) {
  *err = 0;
  int fd = int(raw(SYS_openat, AT_FDCWD, long(path), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0) {
    *err = errno;
    return "cannot open it";
  }
  struct stat st;
  if (raw(SYS_fstat, fd, long(&st)) != 0) {
    *err = errno;
    raw(SYS_close, fd);
    return "cannot stat it";
  }
  if (!S_ISREG(st.st_mode) || st.st_size < long(sizeof(Header)) || st.st_size > long(table_bytes(1u << 20))) {
    raw(SYS_close, fd);
    return "not a virtual-pid table (wrong kind or size of file)";
  }
  void* m = reinterpret_cast<void*>(raw(SYS_mmap, 0, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  const int map_err = errno;
  raw(SYS_close, fd);
  errno = map_err;
  if (m == MAP_FAILED) {
    *err = errno;
    return "cannot map it";
  }
  if (const char* bad = Table::validate(m, uint64_t(st.st_size))) {
    raw(SYS_munmap, long(m), st.st_size);
    return bad;
  }
  g_map_lo = reinterpret_cast<uint64_t>(m);
  g_map_hi = (g_map_lo + uint64_t(st.st_size) + 4095) / 4096 * 4096;  // as /proc/self/maps shows it
  size_t n = 0;
  while (path[n] && n + 1 < sizeof g_path) g_path[n] = path[n], ++n;
  g_path[n] = 0;
  Table t;
  t.attach(m);
  __atomic_add_fetch(&revive_vpid_epoch, 1, __ATOMIC_ACQ_REL);
  __atomic_store_n(&g_table.slot, t.slot, __ATOMIC_RELEASE);
  __atomic_store_n(&g_table.h, t.h, __ATOMIC_RELEASE);
  return nullptr;
}

void forget_table() {
  // The mapping of a previous incarnation is not in the image (mapping()): nothing to unmap.
  __atomic_store_n(&g_table.h, static_cast<Header*>(nullptr), __ATOMIC_RELEASE);
  g_table.slot = nullptr;
  __atomic_add_fetch(&revive_vpid_epoch, 1, __ATOMIC_ACQ_REL);
  g_map_lo = g_map_hi = 0;
  g_path[0] = 0;
}

void describe(plugins::Msg& m, const char* path, const char* why, int err) {
  m.s("virtual-pid table ").s(path).s(" (").s(kEnv).s("): ").s(why);
  if (err) m.s(": ").err(err);
}

}  // namespace

// Per-thread cache of translations (a scan of a few hundred slots costs as much as the system call it
// serves). Each entry is one word, key << 32 | answer (key: the id, bit 31 the direction; 0 = empty),
// so a signal handler's wrapper call (kill and waitpid are async-signal-safe) that interrupts another on
// the same thread never leaves a torn entry. The entries hold for one stamp, the table's generation
// (bumped by every insert and removal) and the process's epoch (bumped whenever a table is mapped: the
// cache is restored with the thread's memory and a new table's generations start over); a new stamp
// empties the cache. Initial-exec TLS: no allocation, no lock.
constexpr uint32_t kCacheSize = 32;
__thread uint64_t t_cache[kCacheSize] __attribute__((tls_model("initial-exec")));
__thread uint64_t t_stamp __attribute__((tls_model("initial-exec")));

template <typename Scan>
pid_t cached(uint32_t key, Scan scan) {
  const uint64_t stamp = uint64_t(__atomic_load_n(&g_table.h->gen, __ATOMIC_ACQUIRE)) << 32 |
                         __atomic_load_n(&revive_vpid_epoch, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&t_stamp, __ATOMIC_RELAXED) != stamp) {
    for (uint32_t i = 0; i < kCacheSize; ++i) __atomic_store_n(&t_cache[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&t_stamp, stamp, __ATOMIC_RELAXED);
  }
  uint64_t* e = &t_cache[(key ^ (key >> 7)) % kCacheSize];
  const uint64_t w = __atomic_load_n(e, __ATOMIC_RELAXED);
  if (w != 0 && uint32_t(w >> 32) == key) return pid_t(uint32_t(w));
  const uint32_t answer = uint32_t(scan());  // stamp taken before: a change during the scan misses next time
  __atomic_store_n(e, uint64_t(key) << 32 | answer, __ATOMIC_RELAXED);
  // A handler on this thread may have moved the cache to a newer stamp meanwhile: ours is then stale.
  if (__atomic_load_n(&t_stamp, __ATOMIC_RELAXED) != stamp) __atomic_store_n(e, 0, __ATOMIC_RELAXED);
  return pid_t(answer);
}

pid_t to_real(pid_t v) {
  if (!active() || v <= 0) return v;
  return cached(uint32_t(v), [v] {
    if (uint32_t r = g_table.real_of(uint32_t(v))) return pid_t(r);
    if (g_table.virt_of(uint32_t(v))) return kNoSuchPid;  // a kernel id of ours the program never had
    return v;
  });
}

pid_t to_virt(pid_t r) {
  if (!active() || r <= 0) return r;
  return cached(uint32_t(r) | 0x80000000u, [r] {
    uint32_t v = g_table.virt_of(uint32_t(r));
    return v ? pid_t(v) : r;
  });
}

pid_t self_tid() {
  pid_t t = t_vtid;
  if (t) return t;
  const pid_t real = real_tid();
  t = real == real_pid() ? g_vpid : register_new(real, true);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  // A checkpoint cut this first use: its handler registered the thread (thread_checkpoint) and a restore
  // kept that id, while `real` may be the old incarnation's kernel tid. Keep theirs.
  if (pid_t mine = t_vtid) return mine;
  t_vtid = t;
  return t;
}

uint32_t epoch() { return __atomic_load_n(&revive_vpid_epoch, __ATOMIC_ACQUIRE); }

namespace {
// Whether a siginfo's si_pid names a sending process (kill, sigqueue, tgkill, a message queue, SIGCHLD's
// child) rather than something else or nothing.
bool names_sender(int signo, int code) {
  return code == SI_USER || code == SI_QUEUE || code == SI_TKILL || code == SI_MESGQ || signo == SIGCHLD;
}
}  // namespace

pid_t virtual_sender(int signo, int code, pid_t pid) {
  return active() && pid > 0 && names_sender(signo, code) ? to_virt(pid) : pid;
}

pid_t virtual_sender_since(int signo, int code, pid_t pid, uint32_t ep) {
  return active() && pid > 0 && names_sender(signo, code) ? to_virt_since(pid, ep) : pid;
}

void virtual_siginfo(siginfo_t* info) {
  if (info) info->si_pid = virtual_sender(info->si_signo, info->si_code, info->si_pid);
}

void real_siginfo(siginfo_t* info) {
  if (active() && info && info->si_pid > 0 && names_sender(info->si_signo, info->si_code))
    info->si_pid = to_real(info->si_pid);
}

// The ids of the incarnation a checkpoint was taken in, kept in the image (see remember_incarnation).
// Zero-initialised: no checkpoint yet.
struct Incarnation {
  uint32_t epoch;
  uint32_t n;
  bool identity;  // no table then: kernel ids were the program's
  uint64_t w[kCapacity];
};
Incarnation g_prev;

void remember_incarnation() {
  g_prev.epoch = epoch();
  g_prev.identity = !active();
  uint32_t n = 0;
  if (!g_prev.identity) {
    uint32_t used = __atomic_load_n(&g_table.h->used, __ATOMIC_ACQUIRE);
    if (used > kCapacity) used = kCapacity;
    for (uint32_t i = 0; i < used; ++i)
      if (uint64_t w = __atomic_load_n(&g_table.slot[i], __ATOMIC_ACQUIRE)) g_prev.w[n++] = w;
  }
  g_prev.n = n;
}

pid_t to_virt_since(pid_t r, uint32_t ep) {
  if (r <= 0 || ep == epoch() || ep != g_prev.epoch) return to_virt(r);  // (two restarts since: best effort)
  if (g_prev.identity) return r;
  for (uint32_t i = 0; i < g_prev.n; ++i)
    if (uint32_t(g_prev.w[i]) == uint32_t(r)) return pid_t(uint32_t(g_prev.w[i] >> 32));
  return r;
}

CallStart call_start() {
  return {epoch(), inject::checkpoint_interruptions(), inject::program_handler_depth()};
}

uint32_t answered_in(CallStart c) {
  const uint32_t now = epoch();
  if (now == c.ep || inject::checkpoint_interruptions() == c.cuts) return now;
  // Made again in the new incarnation: the cut found the thread at the call's `syscall` instruction, or
  // inside a program handler that had interrupted the call there (SA_RESTART makes it again on return).
  return inject::checkpoint_cut_restarts_call(c.depth) ? now : c.ep;
}

void reaped_since(pid_t real, uint32_t ep) {
  if (!active() || real <= 0) return;
  if (ep == epoch()) {
    g_table.remove_real(uint32_t(real));
    return;
  }
  // Reaped in the old incarnation, just before the checkpoint: whatever entry the restored table has
  // for its virtual id is stale, while `real` may now be another process's kernel id.
  const pid_t v = to_virt_since(real, ep);
  if (v > 0) g_table.remove_virt(uint32_t(v));
}

void virtual_siginfo_since(siginfo_t* info, uint32_t ep) {
  if (info && info->si_pid > 0 && names_sender(info->si_signo, info->si_code))
    info->si_pid = to_virt_since(info->si_pid, ep);
}

void init() {
  // Every wrapper's libc function now, never later on the checkpoint path (vpid_prime.h).
  for (const PrimeSlot* p = __start_revive_vpid_prime; p && p < __stop_revive_vpid_prime; ++p) {
    auto* slot = static_cast<void**>(p->slot);
    if (!__atomic_load_n(slot, __ATOMIC_ACQUIRE)) __atomic_store_n(slot, dlsym(RTLD_NEXT, p->name), __ATOMIC_RELEASE);
  }
  // Forks glibc makes without our fork() wrapper (daemon(), forkpty()) still give the child its own ids.
  pthread_atfork(nullptr, nullptr, after_fork_child);
  const char* path = getenv(kEnv);
  if (!path || !*path) return;
  int err = 0;
  if (const char* why = map_table(path, &err)) {
    char line[512];
    plugins::Msg m(line, sizeof line);
    describe(m, path, why, err);
    m.s("; this process cannot see the ids it had before the restart, so it stops");
    plugins::warn(m.c_str());
    raw(SYS_exit_group, 125);
  }
  // An exec'ed image of a process of the table keeps its entry; a new process (posix_spawn) whose
  // kernel pid is a virtual id in use gets a fresh one.
  g_vpid_real = real_pid();
  g_vpid = register_new(g_vpid_real, false);
  t_vtid = 0;
}

int restore(const char* path, char* msg, size_t cap) {
  forget_table();
  const uint32_t npending = g_npending;
  g_npending = 0;
  if (!path || !*path) return 0;
  int err = 0;
  if (const char* why = map_table(path, &err)) {
    plugins::Msg m(msg, cap);
    describe(m, path, why, err);
    return -(err ? err : EINVAL);
  }
  const pid_t real = real_pid();
  const uint32_t v = g_table.virt_of(uint32_t(real));
  if (v == 0) {
    plugins::Msg m(msg, cap);
    describe(m, path, "", 0);
    m.s("no entry for this process (kernel pid ").u(uint64_t(real)).s(")");
    forget_table();
    return -EINVAL;
  }
  g_vpid = pid_t(v);
  g_vpid_real = real;
  for (uint32_t i = 0; i < npending && i < kMaxPending; ++i) {
    const uint32_t vt = g_pending[i][0], rt = g_pending[i][1];
    if (vt == 0 || vt == rt || rt == uint32_t(real)) continue;
    g_table.remove_real(rt);
    if (!g_table.insert(vt, rt)) {
      plugins::Msg m(msg, cap);
      describe(m, path, "full", 0);
      forget_table();
      return -ENOSPC;
    }
  }
  return 0;
}

void thread_checkpoint() {
  t_vtid = active() ? self_tid() : real_tid();
}

void thread_restored() {
  uint32_t i = __atomic_fetch_add(&g_npending, 1, __ATOMIC_ACQ_REL);
  if (i < kMaxPending) {
    g_pending[i][0] = uint32_t(t_vtid);
    g_pending[i][1] = uint32_t(real_tid());
  }
  t_vtid = t_vtid ? t_vtid : real_tid();
}

REVIVE_FORK_PATH bool keeps_kernel_id(pid_t real) {
  return !active() || (g_table.virt_of(uint32_t(real)) == 0 && g_table.real_of(uint32_t(real)) == 0);
}

REVIVE_FORK_PATH void after_fork_child() {
  if (!active()) {
    if (t_vtid) t_vtid = 0;  // a read first: a write is a copy-on-write fault of every fork
    return;
  }
  const pid_t real = real_pid();
  if (real == g_vpid_real) return;  // done already (the atfork handler, then the fork wrapper)
  g_vpid = register_new(real, true);
  // After g_vpid: the parent may be reading both from our memory (child_id).
  __atomic_store_n(&g_vpid_real, real, __ATOMIC_RELEASE);
  t_vtid = g_vpid;
}

bool may_read_children() {
  int v = __atomic_load_n(&g_read_children, __ATOMIC_RELAXED);
  if (v == 0) {
    // Yama's ptrace_scope 0 or 1 lets a parent read its descendants (process_vm_readv); 2 and 3 do not.
    // No Yama: the classic rule (same user), which holds for our own children.
    char c = '0';
    int fd = int(raw(SYS_openat, AT_FDCWD, long("/proc/sys/kernel/yama/ptrace_scope"), O_RDONLY | O_CLOEXEC));
    if (fd >= 0) {
      if (raw(SYS_read, fd, long(&c), 1) != 1) c = '0';
      raw(SYS_close, fd);
    }
    v = c == '0' || c == '1' ? 1 : 2;
    __atomic_store_n(&g_read_children, v, __ATOMIC_RELAXED);
  }
  return v == 1;
}

pid_t child_id(pid_t real) {
  const int saved = errno;
  const struct timespec pause = {0, 20000};
  for (int round = 0;; ++round) {
    // Our library lies at the same address in the child: its g_vpid_real says whether it registered
    // (before, it holds ours), then its g_vpid is the id it took.
    pid_t ids[2] = {0, 0};
    struct iovec local[2] = {{&ids[0], sizeof(pid_t)}, {&ids[1], sizeof(pid_t)}};
    struct iovec remote[2] = {{&g_vpid_real, sizeof(pid_t)}, {&g_vpid, sizeof(pid_t)}};
    const long n = raw(SYS_process_vm_readv, real, long(local), 2, long(remote), 2, 0);
    if (n == long(2 * sizeof(pid_t)) && ids[0] == real && ids[1] > 0) {
      errno = saved;
      return ids[1];
    }
    // The table no longer names the pid (the process whose virtual id it was has left): the child found
    // it so too when it registered, and keeps its kernel pid (keeps_kernel_id).
    if (keeps_kernel_id(real)) break;
    siginfo_t si;
    si.si_pid = 0;
    if (raw(SYS_waitid, P_PID, real, long(&si), WEXITED | WNOHANG | WNOWAIT, 0) != 0 || si.si_pid == real)
      break;  // it died before it registered (or was reaped): its kernel pid is all there is
    if (n < 0 && errno != ESRCH && round > 50000) {  // unreadable after ~1 s: its table entry, if any
      plugins::warn("fork: cannot read the child's virtual pid (process_vm_readv), using the table's entry");
      break;
    }
    raw(SYS_nanosleep, long(&pause), 0);
  }
  errno = saved;
  return to_virt(real);
}

void mapping(uint64_t* lo, uint64_t* hi) {
  *lo = g_map_lo;
  *hi = g_map_hi;
}

const char* table_path() { return g_path; }

}  // namespace revive::vpid
