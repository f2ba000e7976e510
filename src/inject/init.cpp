// Load-time set-up of the engine: configuration from the environment, the checkpoint signal handler
// (raw rt_sigaction with our own restorer: the signal plugin interposes libc's sigaction), glibc layout
// facts the restart needs, plugin init, the coordinator connection; and serving, below.
//
// No engine thread exists between checkpoints. Any second thread costs a syscall-heavy program several
// per cent (the kernel's single-threaded files_struct fast path in fdget and glibc's single-thread paths
// are off while it exists, docs/performance.md), so the engine's work runs inside the checkpoint signal's
// handler, on whichever program thread the kernel picks, switched at once to the engine's own stack
// (cstack). What wakes it is always the checkpoint signal: the coordinator socket is O_ASYNC with
// F_SETSIG = checkpoint signal (new data, EOF or an error raise it, si_code POLL_*), the standalone
// trigger is someone's kill/sigqueue, REVIVE_INTERVAL is a POSIX timer sending it (SI_TIMER); only our
// own tgkill (SI_TKILL from our pid) means "park for a checkpoint" (quiesce.cpp). One thread serves at a
// time (g.serving); a wake-up on another thread meanwhile just returns, and the serving thread looks
// for work again after it let go of the flag, so no wake-up is lost. The serving thread blocks every
// signal while it works and is the "checkpoint thread" of a checkpoint (g.ckpt_rec, skipped by
// suspend_all): in a restored process it continues inside the handler, then returns to the program.
// Why not a thread cloned on demand: it would need its own TLS and glibc bookkeeping, while a program
// thread that is interrupted anyway (a checkpoint stops all of them) already has both.
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "inject/engine.h"
#include "inject/fork_path.h"
#include "inject/hooks.h"
#include "inject/plugin.h"
#include "inject/sys.h"

namespace revive::proctree {
// The proctree plugin's (src/plugins/proctree/pending.cpp): its join timer fired.
void join_timer_due() __attribute__((weak));
}  // namespace revive::proctree

namespace revive::inject {

Engine g;
image::RestartInfo g_restart_info;

int checkpoint_signal() { return g.cfg.sig; }

const char* checkpoint_dir() { return g.cfg.ckpt_dir; }

const char* host_name() { return g.cfg.host_id; }

// The engine's descriptors are not the program's: the fd plugin must neither save nor replace them.
bool fd_reserved(int fd) { return fd >= 0 && (fd == g.image_fd || fd == g.coord_fd); }

uint64_t now_ns() {
  struct timespec ts;
  sys::sc(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

namespace sys {
void log(int level, const char* a, const char* b, const char* c, const char* d) {
  if (g.cfg.log < level) return;
  char line[1024] = "revive: ";
  append(line, sizeof line, a);
  append(line, sizeof line, b);
  append(line, sizeof line, c);
  append(line, sizeof line, d);
  append(line, sizeof line, "\n");
  stderr_line(line, slen(line));
}
}  // namespace sys

namespace {

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  const char* p = v;
  uint64_t r = sys::parse_dec(p);
  return *p ? dflt : r;
}

}  // namespace

void set_coord_config(const char* host, const char* port, const char* secret) {
  Config& c = g.cfg;
  c.coord_port = 0;
  const char* p = port;
  uint64_t v = p ? sys::parse_dec(p) : 0;
  if (!port || !*port || *p || v == 0 || v > 65535) return;
  c.coord_port = uint16_t(v);
  c.coord_host[0] = 0;
  sys::append(c.coord_host, sizeof c.coord_host, host && *host ? host : "127.0.0.1");
  c.secret_file[0] = 0;
  if (secret && *secret) {
    sys::append(c.secret_file, sizeof c.secret_file, secret);
  } else {
    sys::append(c.secret_file, sizeof c.secret_file, c.ckpt_dir);
    sys::append(c.secret_file, sizeof c.secret_file, "/.revive-secret");
  }
}

namespace {

void read_config() {
  Config& c = g.cfg;
  c.log = int(env_u64("REVIVE_LOG", 0));
  c.interval_s = uint32_t(env_u64("REVIVE_INTERVAL", 0));
  c.compress = env_u64("REVIVE_COMPRESS", 0) != 0;
  c.compress_small = env_u64("REVIVE_COMPRESS_SMALL", 1) != 0;
  c.fork = env_u64("REVIVE_FORK", 0) != 0;
  c.zthreads = uint32_t(env_u64("REVIVE_COMPRESS_THREADS", zw_default_threads()));
  if (c.zthreads > kMaxZWorkers) c.zthreads = kMaxZWorkers;
  int sig = int(env_u64("REVIVE_SIGNAL", 0));
  c.sig = (sig >= SIGRTMIN && sig <= SIGRTMAX) ? sig : SIGRTMAX - 2;
  if (sig && c.sig != sig) sys::log(0, "REVIVE_SIGNAL is not a real-time signal number; using the default");
  const char* dir = getenv("REVIVE_CKPT_DIR");
  if (dir && dir[0] == '/') {
    sys::append(c.ckpt_dir, sizeof c.ckpt_dir, dir);
  } else {
    if (!getcwd(c.ckpt_dir, sizeof c.ckpt_dir)) sys::append(c.ckpt_dir, sizeof c.ckpt_dir, "/tmp");
    if (dir && *dir) {
      sys::append(c.ckpt_dir, sizeof c.ckpt_dir, "/");
      sys::append(c.ckpt_dir, sizeof c.ckpt_dir, dir);
    }
  }
  sys::append(c.prog, sizeof c.prog, program_invocation_short_name);
  set_coord_config(getenv("REVIVE_COORD_HOST"), getenv("REVIVE_COORD_PORT"), getenv("REVIVE_SECRET_FILE"));
  if (const char* h = getenv("REVIVE_HOST_ID")) sys::append(c.host_id, sizeof c.host_id, h);
  static const char* const kRankVars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
  for (const char* k : kRankVars) {
    const char* r = getenv(k);
    if (r != nullptr && *r >= '0' && *r <= '9' && c.mpi_rank[0] == 0) sys::append(c.mpi_rank, sizeof c.mpi_rank, r);
  }
  for (char* p = c.prog; *p; ++p)
    if (*p == '/' || *p == ' ') *p = '_';
}

// Offset of struct pthread::tid from the thread pointer: the first 32-bit word equal to our tid. The
// checkpoint thread re-checks it on its own descriptor (a second, independent tid) before trusting it.
void find_glibc_layout() {
  uint64_t fs = 0;
  sys::sc(SYS_arch_prctl, 0x1003 /*ARCH_GET_FS*/, &fs);
  int tid = sys::gettid();
  for (uint32_t off = 0; off < 4096; off += 4) {
    if (*reinterpret_cast<int*>(fs + off) == tid) {
      g.tid_offset = off;
      break;
    }
  }
  auto* off = static_cast<const long*>(dlsym(RTLD_DEFAULT, "__rseq_offset"));
  auto* size = static_cast<const unsigned*>(dlsym(RTLD_DEFAULT, "__rseq_size"));
  if (off && size && *size) {
    g.rseq_offset = *off;
    g.rseq_size = *size < 32 ? 32 : *size;
  }
}

}  // namespace

// Raises the checkpoint signal for the process with si_code POLL_IN: "serve", never "checkpoint". (The
// kernel lets a thread queue a positive si_code only to its own id; it is queued process-wide.)
void wake_up() {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = g.cfg.sig;
  si.si_code = POLL_IN;
  si.si_pid = sys::getpid();
  sys::sc(SYS_rt_sigqueueinfo, sys::gettid(), g.cfg.sig, &si);
}

bool signal_timer_create(int* id) {
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = g.cfg.sig;
  *id = -1;
  return sys::sc(SYS_timer_create, CLOCK_MONOTONIC, &ev, id) == 0;
}

REVIVE_FORK_PATH void arm_interval_timer() {
  if (g.have_timer || !g.cfg.interval_s || (coord_configured() && coord_connected())) return;
  // Raw timer_create: the timer plugin's wrapper would save it as the program's. Created before the
  // program's own timers (constructor, fork child, restore before the plugins), so it takes the same
  // kernel id in every image of the process and never one the timer plugin restores.
  int id = -1;
  if (!signal_timer_create(&id)) {
    sys::log(0, "cannot create the REVIVE_INTERVAL timer; no periodic checkpoints");
    return;
  }
  struct itimerspec its = {{time_t(g.cfg.interval_s), 0}, {time_t(g.cfg.interval_s), 0}};
  sys::sc(SYS_timer_settime, id, 0, &its, nullptr);
  g.interval_timer = id;
  g.have_timer = true;
}

namespace {

// One standalone checkpoint (trigger or interval), with its log line.
// A standalone checkpoint a plugin deferred (-EAGAIN: proctree, a child that a one-process restart
// could not bring back) is tried again 20 ms later by a one-shot timer. The timer is deleted before the
// next attempt, so no image holds it (its kernel id could be one the timer plugin restores).
void defer_standalone() {
  if (!g.have_retry) {
    if (!signal_timer_create(&g.retry_timer)) return;
    g.have_retry = true;
  }
  struct itimerspec its = {{0, 0}, {0, 20000000}};
  sys::sc(SYS_timer_settime, g.retry_timer, 0, &its, nullptr);
}

// A standalone request the application's hooks defer (hooks.cpp): asked again on every wake-up.
bool g_standalone_deferred;

void standalone_checkpoint() {
  char path[2048], err[512];
  uint64_t gen = g.generation + 1;
  err[0] = 0;
  const bool was_deferred = g_standalone_deferred;
  const int hr = hooks_prepare(0, err, sizeof err);
  g_standalone_deferred = hr == 0;
  if (hr == 0) return;
  // Requests (and the timeout timer's signals) that came while it waited are this checkpoint.
  if (was_deferred) g.trigger_seen = __atomic_load_n(&g.trigger, __ATOMIC_ACQUIRE);
  if (hr < 0) {
    sys::log(0, "checkpoint failed: ", err);
    hooks_finish(-1);
    return;
  }
  if (g.have_retry) {
    sys::sc(SYS_timer_delete, g.retry_timer);
    g.have_retry = false;
  }
  int rc = checkpoint_now(gen, path, sizeof path, err, sizeof err);
  if (rc < 0 && g.save_again) {
    sys::log(2, "checkpoint deferred: ", err);
    defer_standalone();
    return;
  }
  if (rc == 1) {
    after_restore();
    restored_continue();
  } else if (rc == 0) {
    // One line with the timings, for people and for bench/transparent.
    uint64_t end = now_ns();
    char t[160] = " quiesce_us=";
    sys::append_u64(t, sizeof t, (g.t_suspended_ns - g.t_start_ns) / 1000);
    sys::append(t, sizeof t, " pause_us=");
    sys::append_u64(t, sizeof t, (g.t_released_ns - g.t_start_ns) / 1000);
    sys::append(t, sizeof t, " total_us=");
    sys::append_u64(t, sizeof t, (end - g.t_start_ns) / 1000);
    sys::log(1, "checkpoint written: ", path, t);
  } else {
    sys::log(0, "checkpoint failed: ", err);
  }
  if (rc < 0) hooks_finish(-1);  // failed before the threads were suspended: the gate opens here
}

// The engine's work, on cstack: the coordinator's frames, then standalone triggers, until none is left.
long serve_main(void*) {
  uint64_t all = ~uint64_t{0};
  sys::sc(SYS_rt_sigprocmask, SIG_BLOCK, &all, nullptr, 8);  // the frame's mask comes back at sigreturn
  g.ckpt_tid = sys::gettid();
  uint64_t fs = 0;
  sys::sc(SYS_arch_prctl, 0x1003, &fs);
  // The tid offset was found on the loading thread; check it on this one (another descriptor, another
  // tid) before a checkpoint relies on it.
  if (g.tid_offset == 0 || *reinterpret_cast<int*>(fs + g.tid_offset) != g.ckpt_tid) {
    sys::log(0, "cannot locate glibc's cached thread id; checkpointing disabled");
    g.ready = false;
    return 0;
  }
  // A fork child that has not joined yet: whatever woke it (its join timer, its parent's poke during a
  // checkpoint), it joins first; until then it has no connection to serve.
  if (g.join_pending) join_finish();
  // Our join timer: poke the fork children that are 30 ms old and have not joined yet.
  if (__atomic_exchange_n(&g.join_timer_fired, 0u, __ATOMIC_ACQ_REL) && proctree::join_timer_due)
    proctree::join_timer_due();
  for (;;) {
    hooks_poke_seen();  // what a notify() asks for is looked at below
    if (coord_connected()) coord_serve();
    else if (g_standalone_deferred) standalone_checkpoint();
    const uint32_t t = __atomic_load_n(&g.trigger, __ATOMIC_ACQUIRE);
    if (t == g.trigger_seen) return 0;
    g.trigger_seen = t;
    if (!coord_connected()) standalone_checkpoint();  // the coordinator decides when it is connected
  }
}

bool work_pending() {
  if (__atomic_load_n(&g.trigger, __ATOMIC_ACQUIRE) != g.trigger_seen) return true;
  if (__atomic_load_n(&g.join_timer_fired, __ATOMIC_ACQUIRE)) return true;
  return hooks_poked() || coord_readable() || coord_durable_ready();
}

// atexit: a process that leaves while its forked writer still writes an image reports that image
// first (coord_exit_report), or the coordinator would see it vanish before the generation is durable;
// then it says BYE (coord_say_bye): an exit, not a kill or a crash, which for an MPI rank would end its
// job. Registered first, so it runs after the program's own handlers. The serving flag makes it the only
// engine work in the process; signals are blocked only while holding it, so that meanwhile a checkpoint
// can still park this thread (the serving thread would otherwise wait for it forever).
void at_exit(int status, void*) {
  if (!g.ready || !coord_connected()) return;
  const uint64_t old = serving_enter();
  coord_exit_report();
  coord_say_bye(status);
  serving_leave(old);
}

}  // namespace

uint64_t serving_enter() {
  uint64_t all = ~uint64_t{0}, old = 0;
  for (;;) {
    sys::sc(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
    uint32_t idle = 0;
    if (__atomic_compare_exchange_n(&g.serving, &idle, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return old;
    sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
    struct timespec ms = {0, 1000000};
    sys::sc(SYS_nanosleep, &ms, nullptr);
  }
}

void serving_leave(uint64_t old_mask) {
  __atomic_store_n(&g.serving, 0u, __ATOMIC_RELEASE);
  sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old_mask, nullptr, 8);
}

void serve_in_handler() {
  if (!g.ready || !g.cstack) return;
  for (;;) {
    uint32_t idle = 0;
    if (!__atomic_compare_exchange_n(&g.serving, &idle, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    revive_on_stack(serve_main, nullptr, g.cstack + g.cstack_len);
    __atomic_store_n(&g.serving, 0u, __ATOMIC_RELEASE);
    // A wake-up that came while we served returned at once: look again now that the flag is down.
    if (!g.ready || !work_pending()) return;
  }
}

bool Buf::put(const void* d, size_t n) {
  if (len + n > cap) {
    size_t ncap = cap ? cap : 65536;
    while (ncap < len + n) ncap *= 2;
    void* np = p ? mremap(p, cap, ncap, MREMAP_MAYMOVE)
                 : mmap(nullptr, ncap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (np == MAP_FAILED) return false;
    p = static_cast<uint8_t*>(np);
    cap = ncap;
  }
  sys::copy(p + len, d, n);
  len += n;
  return true;
}

void Buf::release() {
  if (p) munmap(p, cap);
  p = nullptr;
  len = cap = 0;
}

// Scratch the writer needs while threads are suspended, reserved once (MAP_NORESERVE: only touched
// pages cost memory) and left out of images.
bool alloc_scratch() {
  struct {
    void** where;
    size_t bytes;
  } want[] = {
      {reinterpret_cast<void**>(&g.regions), size_t{65536} * sizeof(image::RegionRecord)},
      {reinterpret_cast<void**>(&g.chunks), size_t{1} << 26},
      {reinterpret_cast<void**>(&g.shm), size_t{4096} * sizeof(image::ShmRecord)},
      {reinterpret_cast<void**>(&g.pagemap), size_t{1} << 20},
      {reinterpret_cast<void**>(&g.text), size_t{1} << 24},
      {reinterpret_cast<void**>(&g.wstack), size_t{1} << 20},
      {reinterpret_cast<void**>(&g.zarena), size_t{64} << 20},
      {reinterpret_cast<void**>(&g.zout), size_t{9} << 20},  // > ZSTD_compressBound(8 MiB chunk)
  };
  g.excl_count = 0;
  for (auto& w : want) {
    void* p = mmap(nullptr, w.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    *w.where = p;
    g.excl[g.excl_count][0] = reinterpret_cast<uint64_t>(p);
    g.excl[g.excl_count][1] = reinterpret_cast<uint64_t>(p) + w.bytes;
    ++g.excl_count;
  }
  g.excl_fixed = g.excl_count;
  g.regions_cap = 65536;
  g.chunks_cap = (size_t{1} << 26) / sizeof(image::ChunkRecord);
  g.shm_cap = 4096;
  g.pagemap_cap = (size_t{1} << 20) / 8;
  g.text_cap = size_t{1} << 24;
  g.wstack_len = size_t{1} << 20;
  g.zarena_len = size_t{64} << 20;
  g.zout_cap = size_t{9} << 20;
  return true;
}

// After a checkpoint (ckpt_resume): the scratch pages it touched (the maps text, region and chunk
// tables, zstd's arena and output, the writer's stack) go back to the kernel: their contents are never
// needed again. Kept, they stayed resident for good, and every later fork() of the program copied and
// write-protected their page-table entries (after one checkpoint of a small program, 504 kB of scratch:
// 126 entries; more after a compressed or a large checkpoint; docs/performance.md "fork+wait after a
// checkpoint"). Not the range we run on (never, today: the writer's stack is left before the resume).
void scratch_release() {
  const uint64_t sp = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  for (uint32_t i = 0; i < g.excl_fixed; ++i) {
    const uint64_t a = g.excl[i][0], len = g.excl[i][1] - g.excl[i][0];
    if (sp < a || sp >= a + len) sys::sc(SYS_madvise, a, len, MADV_DONTNEED);
  }
}

void install_handler() {
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  } ka = {reinterpret_cast<void*>(&revive_handler), SA_SIGINFO | SA_RESTART | SA_ONSTACK | 0x04000000 /*SA_RESTORER*/,
          reinterpret_cast<void*>(&revive_sigreturn), 0};
  long r = sys::sc(SYS_rt_sigaction, g.cfg.sig, &ka, nullptr, 8);
  if (r < 0) sys::log(0, "cannot install the checkpoint signal handler");
}

namespace {

// A numeric coordinator address now, so connecting later never runs getaddrinfo (it allocates).
void resolve_coord_host() {
  if (!g.cfg.coord_port) return;
  unsigned char buf[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, g.cfg.coord_host, buf) == 1 || inet_pton(AF_INET6, g.cfg.coord_host, buf) == 1) return;
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(g.cfg.coord_host, nullptr, &hints, &res) != 0 || !res) return;
  char num[INET6_ADDRSTRLEN] = "";
  const void* a = res->ai_family == AF_INET
                      ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr)
                      : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr);
  if (inet_ntop(res->ai_family, a, num, sizeof num)) {
    g.cfg.coord_host[0] = 0;
    sys::append(g.cfg.coord_host, sizeof g.cfg.coord_host, num);
  }
  freeaddrinfo(res);
}

__attribute__((constructor)) void revive_init() {
  g.image_fd = -1;
  g.coord_fd = -1;
  g.shm_pass_fd = -1;
  read_config();
  find_glibc_layout();
  g.upid = uint64_t(sys::getpid());
  if (!alloc_scratch()) {
    sys::log(0, "cannot reserve scratch memory; checkpointing disabled");
    return;
  }
  // The stack the engine's work runs on: 1 MiB reserved, pages touched on use. Not scratch: a checkpoint
  // continues on it in the restored process, so it is in the image.
  void* cs = mmap(nullptr, size_t{1} << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (cs != MAP_FAILED) {
    g.cstack = static_cast<uint8_t*>(cs);
    g.cstack_len = size_t{1} << 20;
  }
  install_handler();
  hooks_prefault();  // a fork child reads that state: mapped here once, not faulted in by every child
  // zstd: also when a coordinator may ask for compression in its WELCOME (dlopen allocates: not later).
  if ((g.cfg.compress || g.cfg.coord_port) && !compress_load() && g.cfg.compress)
    sys::log(0, "REVIVE_COMPRESS=1 but libzstd.so.1 cannot be loaded; writing uncompressed");
  resolve_coord_host();
  const bool plugins_ok = plugins_init();
  // Test hook (tests/cli/exec_ready_test.sh): widens the window between an exec'd image's connect (in
  // plugins_init) and readiness, where a coordinator frame must not be lost.
  if (uint64_t ms = env_u64("REVIVE_TEST_READY_DELAY_MS", 0)) {
    struct timespec ts = {time_t(ms / 1000), long(ms % 1000) * 1000000};
    sys::sc(SYS_nanosleep, &ts, nullptr);
  }
  // Test hook (tests/channels/peer_gone_test.sh): this process dies MS ms (value 1+MS) into a
  // checkpoint's write phase, while its peers drain towards it: a rank killed in a checkpoint, on cue.
  g.test_die_in_write = env_u64("REVIVE_TEST_DIE_IN_WRITE", 0);
  if (!plugins_ok) sys::log(0, "a plugin failed to initialise; checkpointing disabled");
  else g.ready = g.cstack != nullptr;
  if (!g.ready) return;
  if (coord_configured()) {
    on_exit(at_exit, nullptr);  // on_exit, not atexit: the handler learns the exit status for its BYE
    coord_start();
    // An exec'd image connects from plugins_init (proctree adopts its predecessor's place), before
    // g.ready: a PHASE that arrived then (it joined a checkpoint's suspend) raised a wake-up the handler
    // had to drop, and O_ASYNC raises nothing for bytes already there. Without this the frame sat unread
    // and the checkpoint waited for us until its phase timeout (files.otherhost, a gcc exec'd by make).
    if (coord_readable()) wake_up();
  }
  arm_interval_timer();
  // A checkpoint asked for before we were ready (the handler only counted it) is served now.
  if (__atomic_load_n(&g.trigger, __ATOMIC_ACQUIRE) != g.trigger_seen) wake_up();
}

}  // namespace
}  // namespace revive::inject
