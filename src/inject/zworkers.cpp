// Parallel compression of image chunks: the engine's own worker threads, alive only while one image is
// written (zw_start .. zw_stop, both inside write_image).
//
// Why raw clone() and not pthread_create: the workers are started after the user threads are suspended
// (they may hold glibc's locks; clone is one system call and takes none), and glibc never learns of them,
// so its thread accounting (__nptl_nthreads, the stack lists walked by fork/setxid) is untouched — in
// the image and in the restored process alike. They are not in the image's thread list either: quiesce
// listed /proc/self/task before they existed, and zw_stop waits for the kernel to confirm their exit.
// They have no TLS of their own (they share the checkpoint thread's %fs), which is fine for what they
// run: zstd with our arena allocator (no malloc, no errno, no TLS; the stack-protector canary is only
// read) and raw futex system calls. Signals are all blocked in them. This also works in the child of a
// forked checkpoint (one thread, glibc state unusable): the child compresses in parallel too.
//
// Memory: one MAP_NORESERVE mapping per image (pool control, per worker a stack and a zstd arena, per
// slot an output buffer), made after the writer listed the regions to save (and put in g.excl too),
// unmapped at the end.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "inject/engine.h"
#include "inject/sys.h"

namespace revive::inject {
namespace {

constexpr size_t kStack = 256 << 10;  // zstd level 1 needs a few KiB; generous
constexpr size_t kArena = 32 << 20;   // one zstd context for 8 MiB frames (~ a few MiB used)
constexpr size_t kCtl = 64 << 10;

struct Slot {
  const void* src;
  uint64_t len;
  uint32_t chunk;
  uint8_t* out;             // kOut bytes
  const void* result;       // out or src (raw)
  uint64_t stored;
  volatile uint32_t done;   // futex: 1 when result/stored are set
};

struct Worker {
  void* cctx;
  uint8_t* stack;
  volatile int tid;  // set by the kernel at clone (PARENT_SETTID), cleared + woken at exit (CHILD_CLEARTID)
};

struct Pool {
  uint32_t nworkers, nslots;
  size_t out_cap;
  volatile uint32_t bell;       // futex: bumped on every submit and on stop
  volatile uint32_t stop;
  volatile uint32_t submitted;  // jobs queued (monotonic)
  volatile uint32_t claimed;    // jobs taken by a worker
  uint32_t head;                // oldest job not yet collected (checkpoint thread only)
  Worker w[kMaxZWorkers];
  Slot s[2 * kMaxZWorkers];
};

Pool* pool;
uint8_t* pool_map;
size_t pool_len;
uint32_t pool_excl;  // g.excl_count before we added ours

void work(Pool* p, uint32_t wi) {
  for (;;) {
    const uint32_t bell = __atomic_load_n(&p->bell, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) return;
    uint32_t c = __atomic_load_n(&p->claimed, __ATOMIC_ACQUIRE);
    if (c != __atomic_load_n(&p->submitted, __ATOMIC_ACQUIRE)) {
      if (!__atomic_compare_exchange_n(&p->claimed, &c, c + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
      Slot* s = &p->s[c % p->nslots];
      long n = compress_with(p->w[wi].cctx, s->src, s->len, s->out, p->out_cap);
      const bool smaller = n > 0 && uint64_t(n) < s->len;  // else stored raw: stored_len == len means raw
      s->result = smaller ? static_cast<const void*>(s->out) : s->src;
      s->stored = smaller ? uint64_t(n) : s->len;
      __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
      sys::futex_wake(&s->done);
      continue;
    }
    sys::futex_wait(&p->bell, bell, -1);
  }
}

struct Start {
  Pool* p;
  uint32_t wi;
};
Start starts[kMaxZWorkers];

}  // namespace
}  // namespace revive::inject

// The first C code a worker runs (called from spawn's assembly, hence C linkage and `used`).
extern "C" __attribute__((used, visibility("hidden"))) void revive_zworker_entry(void* arg) {
  auto* st = static_cast<revive::inject::Start*>(arg);
  revive::inject::work(st->p, st->wi);
}

namespace revive::inject {
namespace {

// clone() onto `stack_top`; the child calls revive_zworker_entry(arg) and exits the thread (not the
// process). Returns the tid or -errno. Hand-written because the child must not return through C frames
// that live on the parent's stack.
long spawn(void* stack_top, volatile int* tid, void* arg) {
  const long flags = 0x100 /*VM*/ | 0x200 /*FS*/ | 0x400 /*FILES*/ | 0x800 /*SIGHAND*/ | 0x10000 /*THREAD*/ |
                     0x40000 /*SYSVSEM*/ | 0x100000 /*PARENT_SETTID*/ | 0x200000 /*CHILD_CLEARTID*/;
  register long r10 __asm__("r10") = reinterpret_cast<long>(tid);
  register long r8 __asm__("r8") = 0;
  register long r12 __asm__("r12") = reinterpret_cast<long>(arg);
  long ret;
  __asm__ volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xor %%ebp, %%ebp\n\t"
      "mov %%r12, %%rdi\n\t"
      "call revive_zworker_entry\n\t"
      "mov $60, %%eax\n\t"  // SYS_exit: this thread only
      "xor %%edi, %%edi\n\t"
      "syscall\n\t"
      "hlt\n"
      "1:\n\t"
      : "=a"(ret)
      : "a"(long(SYS_clone)), "D"(flags), "S"(stack_top), "d"(tid), "r"(r10), "r"(r8), "r"(r12)
      : "rcx", "r11", "memory");
  return ret;
}

}  // namespace

uint32_t zw_start(uint32_t want, size_t out_cap) {
  pool = nullptr;
  if (want > kMaxZWorkers) want = kMaxZWorkers;
  if (want == 0) return 0;
  const uint32_t nslots = 2 * want;  // double buffering: each worker has a job while finished ones are written
  out_cap = (out_cap + 4095) / 4096 * 4096;
  pool_len = kCtl + want * (kStack + kArena) + nslots * out_cap;
  const long r = sys::sc(SYS_mmap, 0, pool_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r < 0 && r > -4096) return 0;
  void* m = reinterpret_cast<void*>(r);
  if (g.excl_count >= sizeof g.excl / sizeof g.excl[0]) {
    sys::sc(SYS_munmap, m, pool_len);
    return 0;
  }
  pool_map = static_cast<uint8_t*>(m);
  pool_excl = g.excl_count;
  g.excl[g.excl_count][0] = reinterpret_cast<uint64_t>(m);
  g.excl[g.excl_count][1] = reinterpret_cast<uint64_t>(m) + pool_len;
  ++g.excl_count;
  Pool* p = reinterpret_cast<Pool*>(pool_map);
  static_assert(sizeof(Pool) <= kCtl, "pool control block");
  p->nslots = nslots;
  p->out_cap = out_cap;
  uint8_t* at = pool_map + kCtl;
  for (uint32_t i = 0; i < nslots; ++i, at += out_cap) p->s[i].out = at;
  // Workers' signal mask: all blocked (they must not take the program's signals), set around clone.
  uint64_t all = ~0ull, old = 0;
  sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
  for (uint32_t i = 0; i < want; ++i) {
    Worker* w = &p->w[i];
    w->stack = at;
    w->cctx = compress_ctx_new(at + kStack, kArena);
    at += kStack + kArena;
    if (!w->cctx) break;
    starts[i] = Start{p, i};
    if (spawn(w->stack + kStack, &w->tid, &starts[i]) <= 0) break;
    p->nworkers = i + 1;
  }
  sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
  pool = p;
  if (!p->nworkers) zw_stop();
  return pool ? p->nworkers : 0;
}

bool zw_full() { return pool->submitted - pool->head == pool->nslots; }
bool zw_empty() { return !pool || pool->submitted == pool->head; }

void zw_submit(uint32_t chunk, const void* src, uint64_t len) {
  Slot* s = &pool->s[pool->submitted % pool->nslots];
  s->src = src;
  s->len = len;
  s->chunk = chunk;
  s->done = 0;
  __atomic_add_fetch(&pool->submitted, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch(&pool->bell, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&pool->bell);
}

void zw_oldest(uint32_t* chunk, const void** data, uint64_t* stored) {
  Slot* s = &pool->s[pool->head % pool->nslots];
  while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE)) sys::futex_wait(&s->done, 0, -1);
  *chunk = s->chunk;
  *data = s->result;
  *stored = s->stored;
}

void zw_pop() { ++pool->head; }

void zw_stop() {
  Pool* p = pool;
  if (!p) return;
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch(&p->bell, 1, __ATOMIC_RELEASE);
  sys::futex_wake(&p->bell);
  // The kernel clears tid and wakes us when a worker has exited: only then may its stack go.
  for (uint32_t i = 0; i < p->nworkers; ++i) {
    for (;;) {
      const int t = __atomic_load_n(&p->w[i].tid, __ATOMIC_ACQUIRE);
      if (t == 0) break;
      // Not FUTEX_PRIVATE: the kernel's wake at thread exit is a shared-futex wake, another key.
      sys::sc(SYS_futex, &p->w[i].tid, 0 /*FUTEX_WAIT*/, t, 0, 0, 0);
    }
  }
  pool = nullptr;
  g.excl_count = pool_excl;
  sys::sc(SYS_munmap, pool_map, pool_len);
}

// A restored process comes back with `pool` as it was while its image was being written (non-null): the
// pool's memory itself was never saved. Forget it before the next image so that neither the inline path
// (zw_empty) nor zw_stop touches the dead mapping, and drop its g.excl entry.
void zw_forget_restored() {
  if (!pool) return;
  pool = nullptr;
  g.excl_count = pool_excl;
}

uint32_t zw_default_threads() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > long(kMaxZWorkers) ? kMaxZWorkers : uint32_t(n);
}

}  // namespace revive::inject
