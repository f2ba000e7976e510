// Quiescing: the checkpoint thread tgkill()s every other thread of the process with the checkpoint
// signal; each saves where to continue and parks on a futex inside the handler. Threads are found by
// listing /proc/self/task (not only those we saw created), re-listed until no new thread appears, so
// threads made by raw clone or before our constructor are caught too.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>

#include "inject/engine.h"
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

}  // namespace

uint32_t checkpoint_interruptions() { return t_interruptions; }

extern "C" void revive_handler(int, void* info, void*) {
  auto* si = static_cast<siginfo_t*>(info);
  int saved_errno = errno;
  // Before anything else, and before the context is saved: a restored thread comes back through the
  // same handler with the incremented value in its restored TLS, so its wrapper retries too.
  t_interruptions = t_interruptions + 1;
  int pid = sys::getpid();
  if (si->si_code != SI_TKILL || si->si_pid != pid) {
    // A wake-up. Anyone else sending the checkpoint signal (kill, sigqueue) and the interval timer
    // (SI_TIMER) ask for a checkpoint (standalone trigger); data or EOF on the coordinator socket
    // (O_ASYNC, si_code POLL_*) only needs serving.
    if (si->si_code <= 0) __atomic_add_fetch(&g.trigger, 1, __ATOMIC_RELEASE);
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
  while (__atomic_load_n(&g.release, __ATOMIC_ACQUIRE) == seen) sys::futex_wait(&g.release, seen, -1);
  errno = saved_errno;
}

bool suspend_all(char* err, size_t err_len) {
  uint32_t old = g.nslots < kMaxThreads ? g.nslots : kMaxThreads;
  for (uint32_t i = 0; i < old; ++i) g.slots[i].ready = 0;
  g.nslots = 0;
  g.arrived = 0;
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
