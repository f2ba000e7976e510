// Quiescing: the checkpoint thread tgkill()s every other thread of the process with the checkpoint
// signal; each saves where to continue and parks on a futex inside the handler. Threads are found by
// listing /proc/self/task (not only those we saw created), re-listed until no new thread appears, so
// threads made by raw clone or before our constructor are caught too.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <ucontext.h>

#include "inject/engine.h"
#include "inject/plugin.h"
#include "plugins/vpid/vpid.h"
#include "inject/sys.h"

namespace revive::inject {
namespace {

long now_ms() {
  struct timespec ts;
  sys::sc(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Fills tids with the thread ids of this process; returns the count or -errno.
long list_tasks(int* tids, long cap) {
  int fd = int(sys::sc(SYS_open, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd < 0) return fd;
  char buf[4096];
  long n = 0;
  for (;;) {
    long got = sys::sc(SYS_getdents64, fd, buf, sizeof buf);
    if (got <= 0) break;
    for (long pos = 0; pos < got;) {
      auto* reclen = reinterpret_cast<unsigned short*>(buf + pos + 16);
      const char* name = buf + pos + 19;
      if (name[0] >= '0' && name[0] <= '9' && n < cap) {
        const char* p = name;
        tids[n++] = int(sys::parse_dec(p));
      }
      pos += *reclen;
    }
  }
  sys::sc(SYS_close, fd);
  return n;
}

// A zombie (e.g. a main thread that called pthread_exit) never runs a handler.
bool is_zombie(int tid) {
  char path[64] = "/proc/self/task/";
  sys::append_u64(path, sizeof path, uint64_t(tid));
  sys::append(path, sizeof path, "/stat");
  int fd = int(sys::sc(SYS_open, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return true;  // gone
  char buf[512];
  long n = sys::sc(SYS_read, fd, buf, sizeof buf - 1);
  sys::sc(SYS_close, fd);
  if (n <= 0) return true;
  buf[n] = 0;
  for (long i = n - 1; i > 0; --i)
    if (buf[i] == ')') return i + 2 < n && (buf[i + 2] == 'Z' || buf[i + 2] == 'X');
  return false;
}

bool arrived(int tid) {
  uint32_t n = __atomic_load_n(&g.nslots, __ATOMIC_ACQUIRE);
  if (n > kMaxThreads) n = kMaxThreads;
  for (uint32_t i = 0; i < n; ++i)
    if (__atomic_load_n(&g.slots[i].ready, __ATOMIC_ACQUIRE) && int(g.slots[i].rec.tid) == tid) return true;
  return false;
}

void fill_record(image::ThreadRecord* r, int tid) {
  r->tid = uint64_t(tid);
  sys::sc(SYS_arch_prctl, 0x1003 /*ARCH_GET_FS*/, &r->fs_base);
  uint64_t head = 0, len = 0;
  if (sys::sc(SYS_get_robust_list, 0, &head, &len) == 0) {
    r->robust_head = head;
    r->robust_len = len;
  }
  r->tid_addr = g.tid_offset ? r->fs_base + g.tid_offset : 0;
  r->is_main = tid == sys::getpid();
}

// How many times the checkpoint signal interrupted this thread. The signal plugin's sleep and wait
// wrappers compare it around a call that fails with EINTR: an interruption caused only by the engine is
// resumed for the remaining time instead of surfacing (the kernel turns every restartable sleep into EINTR
// once a handler ran). Initial-exec TLS: the engine is preloaded, so its block is static, and reading it in
// a signal handler takes no lock.
__thread uint32_t t_interruptions __attribute__((tls_model("initial-exec")));

// Whether the engine's last signal found this thread at a `syscall` instruction: the kernel had turned
// back a restartable call it interrupted (rip moved back onto the instruction, SA_RESTART), or the thread
// was about to enter one. Either way, a thread restored from that point makes the call again in the new
// incarnation; otherwise the call (if any) had returned, and an id in its result is the old
// incarnation's (vpid.h, answered_in). Set with t_interruptions, restored with the thread's TLS.
__thread bool t_cut_at_syscall __attribute__((tls_model("initial-exec")));

// The program's own signal handlers this thread is inside (the signal plugin's trampoline reports entry
// and exit: program_handler_enter/leave), and for each nesting level k < 64 whether the handler at that
// level was entered over a `syscall` instruction (bit k of t_over_syscall): the call it interrupted is
// made again when the handler returns (SA_RESTART). Snapshotted with t_cut_at_syscall at every engine
// signal, so a call interrupted by a handler that the checkpoint then cut is known to be made again in
// the restored process, though the engine found the thread inside the handler (checkpoint_cut_restarts_call).
__thread uint32_t t_hdepth __attribute__((tls_model("initial-exec")));
__thread uint64_t t_over_syscall __attribute__((tls_model("initial-exec")));
__thread uint32_t t_cut_hdepth __attribute__((tls_model("initial-exec")));
__thread uint64_t t_cut_over_syscall __attribute__((tls_model("initial-exec")));

// x86-64 `syscall` is 0f 05. The instruction at rip is mapped and readable (text pages are r-x); the
// second byte is read only after a 0f, which starts a two-byte opcode, so it is mapped too.
bool at_syscall_insn(const void* uctx) {
  const auto* uc = static_cast<const ucontext_t*>(uctx);
  if (!uc) return false;
  const auto* ip = reinterpret_cast<const volatile unsigned char*>(uc->uc_mcontext.gregs[REG_RIP]);
  return ip && ip[0] == 0x0f && ip[1] == 0x05;
}

// Signals queued to one thread (tgkill, pthread_kill, pthread_sigqueue, a timer aimed at a thread) that
// it has not taken when the checkpoint parks it. The kernel keeps them in that thread's own queue, which
// no image held: a restart lost them (a thread waiting in sigtimedwait for a signal sent just before the
// checkpoint waited forever; vpid_vtree's "thread-ack"). Each thread takes its own before it parks, into
// a pool shared by the threads (static: restored with the process's memory; each entry names its slot,
// and a thread's entries are in the order it took them), and queues them to itself again when it is
// released — resumed, or restored on a new kernel thread (then to its new tid). Process-wide pending
// signals are the signal plugin's (the checkpoint thread takes those, and its own).
constexpr uint32_t kPool = 4096;  // 512 KiB of bss, touched only as far as it is used
constexpr uint16_t kFree = 0xffff;
siginfo_t g_pool[kPool];
uint16_t g_pool_slot[kPool];
volatile uint32_t g_pool_used;

// A thread's own pending set (SigPnd of its status file; ShdPnd is the process's). tid 0: this thread.
uint64_t own_pending(int tid = 0) {
  char path[64] = "/proc/thread-self/status";
  if (tid) {
    sys::zero(path, sizeof path);
    sys::append(path, sizeof path, "/proc/self/task/");
    sys::append_u64(path, sizeof path, uint64_t(tid));
    sys::append(path, sizeof path, "/status");
  }
  int fd = int(sys::sc(SYS_open, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  char buf[2048];
  long n = sys::sc(SYS_read, fd, buf, sizeof buf - 1);
  sys::sc(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  static const char kKey[] = "\nSigPnd:\t";
  for (long i = 0; i + long(sizeof kKey) - 1 < n; ++i) {
    long k = 0;
    while (kKey[k] && buf[i + k] == kKey[k]) ++k;
    if (kKey[k]) continue;
    uint64_t v = 0;
    for (const char* p = buf + i + k;; ++p) {
      int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
      if (d < 0) return v;
      v = v << 4 | uint64_t(d);
    }
  }
  return 0;
}

// Takes this thread's own pending signals into the pool, for slot `slot`.
void stash_own(uint32_t slot) {
  const uint64_t ckbit = uint64_t{1} << (g.cfg.sig - 1);
  uint64_t any = 0;  // this thread's and the process's: nothing (the usual case) costs one system call
  if (sys::sc(SYS_rt_sigpending, &any, 8) != 0 || (any & ~ckbit) == 0) return;
  uint64_t pend = own_pending();
  if (!pend) return;
  const int ckpt = g.cfg.sig;
  for (int sig = 1; sig <= 64; ++sig) {
    const uint64_t bit = uint64_t{1} << (sig - 1);
    if (!(pend & bit) || sig == SIGKILL || sig == SIGSTOP || sig == ckpt) continue;
    // rt_sigtimedwait takes from this thread's queue before the process's; one instance at a time, while
    // the thread's own bit is still set (a real-time signal may be queued several times).
    while (pend & bit) {
      const uint32_t k = __atomic_fetch_add(&g_pool_used, 1, __ATOMIC_ACQ_REL);
      if (k >= kPool) {
        sys::log(1, "more than 4096 signals pending for the threads: the rest stay out of the image");
        return;
      }
      uint64_t set = bit;
      struct timespec zero = {0, 0};
      if (sys::sc(SYS_rt_sigtimedwait, &set, &g_pool[k], &zero, 8) != sig) {
        g_pool_slot[k] = kFree;
        break;
      }
      vpid::virtual_siginfo(&g_pool[k]);  // the sender as the program knows it (as the plugin's)
      __atomic_store_n(&g_pool_slot[k], uint16_t(slot), __ATOMIC_RELEASE);
      pend = own_pending();
    }
  }
}

// Queues this thread's stashed signals to it again, in the order it took them.
void requeue_own(uint32_t slot) {
  const uint32_t used = __atomic_load_n(&g_pool_used, __ATOMIC_ACQUIRE);
  const long pid = sys::getpid(), tid = sys::gettid();
  for (uint32_t k = 0; k < used && k < kPool; ++k) {
    if (__atomic_load_n(&g_pool_slot[k], __ATOMIC_ACQUIRE) != slot) continue;
    siginfo_t info = g_pool[k];
    vpid::real_siginfo(&info);
    if (sys::sc(SYS_rt_tgsigqueueinfo, pid, tid, info.si_signo, &info) != 0)
      sys::log(1, "cannot queue a thread's pending signal to it again");
    __atomic_store_n(&g_pool_slot[k], kFree, __ATOMIC_RELEASE);
  }
}

// Start of a round: the pool starts over unless a thread of the last round has not taken its entries
// back yet (it is still on its way out of the handler); then the round appends.
void pool_reset() {
  const uint32_t used = __atomic_load_n(&g_pool_used, __ATOMIC_ACQUIRE);
  for (uint32_t k = 0; k < used && k < kPool; ++k)
    if (__atomic_load_n(&g_pool_slot[k], __ATOMIC_ACQUIRE) != kFree) return;
  __atomic_store_n(&g_pool_used, 0, __ATOMIC_RELEASE);
}

// Parked threads wait on g_park, which moves on every release and every stash request (g_stash_req):
// a thread parked early can still be sent a signal by one not parked yet, so once all are parked the
// checkpoint thread asks them to take what came meanwhile (stash_latecomers) and counts their answers.
volatile uint32_t g_park, g_stash_req, g_stash_acks;

void wake_parked() {
  __atomic_add_fetch(&g_park, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&g_park);
}

// All threads parked: if any of them has a signal of its own pending, every parked thread takes its own
// into its stash (a thread has none: one rt_sigpending), so the image holds them.
void stash_latecomers() {
  uint32_t n = __atomic_load_n(&g.nslots, __ATOMIC_ACQUIRE), ready = 0;
  if (n > kMaxThreads) n = kMaxThreads;
  const uint64_t ckbit = uint64_t{1} << (g.cfg.sig - 1);
  bool need = false;
  for (uint32_t k = 0; k < n; ++k) {
    if (!__atomic_load_n(&g.slots[k].ready, __ATOMIC_ACQUIRE)) continue;
    ++ready;
    if (!need && (own_pending(int(g.slots[k].rec.tid)) & ~ckbit)) need = true;
  }
  if (!need) return;
  const uint32_t acks = __atomic_load_n(&g_stash_acks, __ATOMIC_ACQUIRE);
  __atomic_add_fetch(&g_stash_req, 1, __ATOMIC_RELEASE);
  wake_parked();
  const long start = now_ms();
  for (;;) {
    const uint32_t a = __atomic_load_n(&g_stash_acks, __ATOMIC_ACQUIRE);
    if (a - acks >= ready) return;
    if (now_ms() - start > 2000) {
      sys::log(1, "a parked thread did not take its pending signals within 2 s: they stay out of the image");
      return;
    }
    sys::futex_wait(&g_stash_acks, a, 100000000);
  }
}

}  // namespace

static void (*g_cut_fixup)(void*);  // set_cut_fixup
void set_cut_fixup(void (*fixup)(void* uctx)) { __atomic_store_n(&g_cut_fixup, fixup, __ATOMIC_RELEASE); }

uint32_t checkpoint_interruptions() { return t_interruptions; }

uint32_t program_handler_depth() { return t_hdepth; }

void program_handler_enter(const void* uctx) {
  const uint32_t k = t_hdepth;
  if (k < 64) {
    const uint64_t bit = uint64_t(1) << k;
    t_over_syscall = at_syscall_insn(uctx) ? (t_over_syscall | bit) : (t_over_syscall & ~bit);
  }
  t_hdepth = k + 1;
}

void program_handler_leave() {
  if (t_hdepth > 0) t_hdepth = t_hdepth - 1;
}

bool checkpoint_cut_restarts_call(uint32_t depth) {
  // Cut inside a handler that interrupted the call (a deeper level): the call is made again when that
  // handler returns if it was entered over the call's `syscall` instruction.
  if (t_cut_hdepth > depth) return depth < 64 && (t_cut_over_syscall >> depth) & 1;
  return t_cut_at_syscall;
}

extern "C" void revive_handler(int, void* info, void* uctx) {
  auto* si = static_cast<siginfo_t*>(info);
  int saved_errno = errno;
  // Before anything else, and before the context is saved: a restored thread comes back through the
  // same handler with the incremented value in its restored TLS, so its wrapper retries too.
  if (auto* fix = __atomic_load_n(&g_cut_fixup, __ATOMIC_ACQUIRE)) fix(uctx);
  t_cut_at_syscall = at_syscall_insn(uctx);
  t_cut_hdepth = t_hdepth;
  t_cut_over_syscall = t_over_syscall;
  t_interruptions = t_interruptions + 1;
  int pid = sys::getpid();
  if (si->si_code != SI_TKILL || si->si_pid != pid) {
    // A wake-up. Anyone else sending the checkpoint signal (kill, sigqueue) and the interval timer
    // (SI_TIMER) ask for a checkpoint (standalone trigger); data or EOF on the coordinator socket
    // (O_ASYNC, si_code POLL_*) only needs serving.
    // The proctree plugin's join timer only asks for a look at late fork children.
    if (si->si_code == SI_TIMER && si->si_value.sival_int == kJoinTimerTag)
      __atomic_store_n(&g.join_timer_fired, 1u, __ATOMIC_RELEASE);
    else if (si->si_code <= 0)
      __atomic_add_fetch(&g.trigger, 1, __ATOMIC_RELEASE);
    serve_in_handler();
    errno = saved_errno;
    return;
  }
  if (!__atomic_load_n(&g.suspending, __ATOMIC_ACQUIRE)) {  // late signal of a failed round
    errno = saved_errno;
    return;
  }
  const uint32_t seen = __atomic_load_n(&g.release, __ATOMIC_ACQUIRE);
  const uint32_t i = __atomic_fetch_add(&g.nslots, 1, __ATOMIC_ACQ_REL);
  if (i < kMaxThreads) {
    ThreadSlot* const s = &g.slots[i];
    sys::zero(&s->rec, sizeof s->rec);
    fill_record(&s->rec, sys::gettid());
    vpid::thread_checkpoint();  // the tid the program sees, in this thread's TLS (restored with it)
    stash_own(i);
    if (revive_save_ctx(s->rec.ctx) == 0) {
      __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
      __atomic_add_fetch(&g.arrived, 1, __ATOMIC_RELEASE);
      sys::futex_wake(&g.arrived);
    } else {
      // A restored process: we run on a fresh kernel thread made by revive-restart.
      restored_thread_fixup(s->rec);
      drop_restart_caps();
      __atomic_add_fetch(&g.restored, 1, __ATOMIC_RELEASE);
      sys::futex_wake(&g.restored);
    }
  }
  // Parked until released; meanwhile, take signals sent to this thread after it parked when asked.
  uint32_t done_req = __atomic_load_n(&g_stash_req, __ATOMIC_ACQUIRE);
  for (;;) {
    const uint32_t park = __atomic_load_n(&g_park, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&g.release, __ATOMIC_ACQUIRE) != seen) break;
    const uint32_t req = __atomic_load_n(&g_stash_req, __ATOMIC_ACQUIRE);
    if (req != done_req) {
      done_req = req;
      if (i < kMaxThreads) stash_own(i);
      __atomic_add_fetch(&g_stash_acks, 1, __ATOMIC_RELEASE);
      sys::futex_wake(&g_stash_acks);
      continue;
    }
    sys::futex_wait(&g_park, park, -1);
  }
  if (i < kMaxThreads) requeue_own(i);
  errno = saved_errno;
}

bool suspend_all(char* err, size_t err_len) {
  uint32_t old = g.nslots < kMaxThreads ? g.nslots : kMaxThreads;
  for (uint32_t i = 0; i < old; ++i) g.slots[i].ready = 0;
  g.nslots = 0;
  g.arrived = 0;
  pool_reset();
  __atomic_store_n(&g.suspending, 1, __ATOMIC_RELEASE);
  static int signalled[kMaxThreads];  // only the checkpoint thread runs this
  static int now[kMaxThreads];
  long nsig = 0;
  const int self = sys::gettid(), pid = sys::getpid();
  const long start = now_ms();
  for (;;) {
    long n = list_tasks(now, kMaxThreads);
    if (n < 0) {
      sys::append(err, err_len, "cannot list /proc/self/task");
      break;
    }
    bool done = true;
    const bool slow = now_ms() - start > 200;
    for (long k = 0; k < n; ++k) {
      int tid = now[k];
      if (tid == self) continue;
      bool sent = false;
      for (long j = 0; j < nsig && !sent; ++j) sent = signalled[j] == tid;
      if (!sent) {
        if (nsig >= long(kMaxThreads)) {
          sys::append(err, err_len, "more than 1024 threads");
          goto fail;
        }
        if (sys::sc(SYS_tgkill, pid, tid, g.cfg.sig) == 0) {
          signalled[nsig++] = tid;
          done = false;
        }
        continue;
      }
      if (!arrived(tid) && !(slow && is_zombie(tid))) done = false;
    }
    if (done) {
      __atomic_store_n(&g.suspending, 0, __ATOMIC_RELEASE);
      stash_latecomers();
      return true;
    }
    if (now_ms() - start > 10000) {
      sys::append(err, err_len, "a thread did not reach the checkpoint handler within 10 s (signal blocked?)");
      break;
    }
    uint32_t a = __atomic_load_n(&g.arrived, __ATOMIC_ACQUIRE);
    sys::futex_wait(&g.arrived, a, 2000000);
  }
fail:
  __atomic_store_n(&g.suspending, 0, __ATOMIC_RELEASE);
  release_all();
  return false;
}

void release_all() {
  __atomic_add_fetch(&g.release, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&g.release);
  wake_parked();
}

void drop_restart_caps() {
  const char* v = blob_env(g_restart_info, "REVIVE_DROP_CAPS");
  if (!v || *v != '1') return;
  sys::sc(SYS_prctl, 47 /*PR_CAP_AMBIENT*/, 4 /*PR_CAP_AMBIENT_CLEAR_ALL*/, 0, 0, 0);
  struct {
    uint32_t version;
    int pid;
  } h = {0x20080522 /*_LINUX_CAPABILITY_VERSION_3*/, 0};
  uint32_t data[6] = {0, 0, 0, 0, 0, 0};  // effective, permitted, inheritable for caps 0-31 and 32-63
  if (sys::sc(SYS_capset, &h, data) != 0) sys::log(1, "cannot drop the restart's capabilities");
}

void restored_thread_fixup(const image::ThreadRecord& r) {
  vpid::thread_restored();  // (its virtual tid, its new tid), published by vpid::restore()
  if (r.robust_head) sys::sc(SYS_set_robust_list, r.robust_head, r.robust_len);
  if (g.rseq_size) {
    uint64_t area = r.fs_base + uint64_t(g.rseq_offset);
    *reinterpret_cast<volatile uint64_t*>(area + 8) = 0;  // rseq_cs: no critical section in progress
    long rc = sys::sc(SYS_rseq, area, g.rseq_size, 0, 0x53053053 /*RSEQ_SIG*/);
    if (rc < 0) sys::log(1, "rseq re-registration failed");
  }
}

}  // namespace revive::inject
