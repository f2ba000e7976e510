// Shared state of the injected engine. One plain global (zero-initialised .bss, no constructor), so it is
// valid before libc runs our constructor and is restored with the rest of memory.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "image/format.h"
#include "image/restart_info.h"

extern "C" int revive_save_ctx(uint64_t ctx[8]) __attribute__((returns_twice));
extern "C" void revive_sigreturn();
extern "C" long revive_on_stack(long (*fn)(void*), void* arg, void* stack_top);

namespace revive::inject {

constexpr uint32_t kMaxThreads = 1024;
constexpr uint32_t kMaxPluginSections = 32;
constexpr uint32_t kMaxZWorkers = 32;

struct Config {
  char ckpt_dir[1024];  // absolute
  char prog[64];
  uint32_t interval_s;  // 0: only on trigger / coordinator
  int sig;
  int log;
  bool compress;
  // REVIVE_COMPRESS_SMALL (default 1): even when compress is off, regions under kSmallRegion (writer.cpp)
  // are zstd frames: a program's own metadata (heap, libraries' data, stacks) shrinks 2-4x for a few ms.
  bool compress_small;
  bool fork;
  uint32_t zthreads;  // REVIVE_COMPRESS_THREADS: compression workers (0: compress on the writing thread)
  char coord_host[256];
  uint16_t coord_port;  // 0: no coordinator (standalone)
  char secret_file[1100];
  // The rank an MPI launcher gave this process (OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK), "" if none:
  // the coordinator treats a rank that ends without exit() as the end of its job (docs/mpi.md).
  char mpi_rank[16];
  char host_id[64];  // REVIVE_HOST_ID ("" = hostname); a restart on another host takes the restarter's
};

struct ThreadSlot {
  image::ThreadRecord rec;
  volatile uint32_t ready;
};

// A growable byte buffer backed by mmap (never malloc).
struct Buf {
  uint8_t* p;
  size_t len, cap;
  bool put(const void* d, size_t n);
  void release();
};

struct PluginOut {
  const char* name;
  uint32_t version;
  Buf data;
};

struct Engine {
  Config cfg;
  uint64_t upid;
  // Next to upid: a fork child writes these, one copy-on-write fault for the page (fork_child.cpp).
  int coord_fd;  // coordinator socket (fd_reserved), -1 when none
  bool joined_outside;  // WELCOME outside=1: joined during a checkpoint it is not part of (proctree)
  volatile bool join_pending;  // a fork child that has not joined the coordinator yet (lazy join)
  // REVIVE_TEST_DIE_IN_WRITE=1+MS (tests/channels/peer_gone): SIGKILL MS ms into the write phase; 0: off
  uint64_t test_die_in_write;
  uint64_t generation;  // last generation written
  char gen_dir[1200];   // the generation directory of the checkpoint being saved (plugins' generation_dir())
  // A forked writer the coordinator's phases did not wait for (ckpt_write with wait_writer false): its
  // pid until reaped (writer_reap), and the image it writes.
  long writer_pid;
  long writer_parent;  // the process that forked it (a vfork child shares g, not the writer)
  char writer_path[1400];
  // In a forked writer: where it says (one byte: '1' if the process maps shared memory objects, '0' if
  // not) that it has read them; -1 elsewhere. Until then the program may not write them (checkpoint.cpp).
  int shm_pass_fd;
  // Quiesce protocol (futex words).
  volatile uint32_t trigger;     // bumped on an external checkpoint request
  volatile uint32_t suspending;  // 1 while a checkpoint signals threads
  volatile uint32_t arrived;
  volatile uint32_t nslots;
  volatile uint32_t release;     // threads wait while it equals the value they saw on entry
  volatile uint32_t restored;    // restored user threads that reached the engine
  ThreadSlot slots[kMaxThreads];
  image::ThreadRecord ckpt_rec;
  int ckpt_tid;
  // glibc layout facts, found at init.
  uint32_t tid_offset;
  int64_t rseq_offset;
  uint32_t rseq_size;
  // Scratch for the writer (mmap'ed, MAP_NORESERVE, excluded from images).
  image::RegionRecord* regions;
  size_t regions_cap;
  image::ChunkRecord* chunks;
  size_t chunks_cap;
  image::ShmRecord* shm;  // one per shared memory object mapping (writer.cpp)
  size_t shm_cap;
  uint64_t* pagemap;
  size_t pagemap_cap;  // entries
  char* text;          // /proc reading buffer
  uint8_t* zarena;     // zstd's context (compress.cpp)
  size_t zarena_len;
  uint8_t* zout;       // one compressed chunk
  size_t zout_cap;
  uint8_t* wstack;     // stack the writer runs on, so the checkpoint thread's own stack holds still
  size_t wstack_len;
  size_t text_cap;
  uint64_t excl[48][2];  // engine scratch ranges not to save
  uint32_t excl_fixed;   // how many of them are the permanent scratch
  uint32_t excl_count;
  PluginOut plugin_out[kMaxPluginSections];
  uint32_t plugin_out_count;
  bool save_again;  // the last ckpt_write failed because a plugin refused for now (-EAGAIN): try again
  image::ProcessInfo proc;
  // Serving (init.cpp): no engine thread exists between checkpoints; the work runs inside the checkpoint
  // signal's handler on whichever thread the kernel picked, on cstack (in the image: a checkpoint's
  // continuation lives there).
  volatile uint32_t serving;  // 1 while one thread serves; others' wake-ups leave the work to it
  uint32_t trigger_seen;      // the last `trigger` value acted upon
  uint8_t* cstack;
  size_t cstack_len;
  int interval_timer;         // kernel POSIX timer id of REVIVE_INTERVAL (standalone), valid if have_timer
  bool have_timer;
  int retry_timer;            // one-shot timer of a deferred standalone checkpoint, valid if have_retry
  bool have_retry;
  // The proctree plugin's join timer fired (its children that have not joined are poked in serve_main).
  volatile uint32_t join_timer_fired;
  int image_fd;  // while writing (fd_reserved)
  bool released; // user threads already let go in this checkpoint
  uint64_t t_start_ns, t_suspended_ns, t_released_ns;  // timings of the last checkpoint (log, bench)
  bool ready;
};

extern Engine g;
extern image::RestartInfo g_restart_info;

// init.cpp
uint64_t now_ns();  // CLOCK_MONOTONIC
// The checkpoint signal's handler, for a wake-up (not a suspend request): serves the engine's work on this
// thread until there is none left (see init.cpp).
void serve_in_handler();
// Queues a wake-up for the process (the checkpoint signal with si_code POLL_IN: serve, not checkpoint).
void wake_up();
// Engine work outside the handler (at exit, a fork child's join from a wrapper): blocks every signal and
// takes the serving flag, so it is the only engine work in the process; returns the old signal mask.
// Signals are blocked only while the flag is held, so that meanwhile a checkpoint can still park this
// thread (the serving thread would otherwise wait for it forever).
uint64_t serving_enter();
void serving_leave(uint64_t old_mask);
// REVIVE_INTERVAL without a coordinator: a POSIX timer (raw, invisible to the timer plugin) sending the
// checkpoint signal every interval. Idempotent; nothing to do with a coordinator or without an interval.
void arm_interval_timer();
// A POSIX timer sending the checkpoint signal (SI_TIMER: a trigger), created with the raw system call so
// that the timer plugin's wrapper does not take it for the program's. False if the kernel refuses.
bool signal_timer_create(int* id);
// Coordinator address from REVIVE_COORD_HOST/PORT/SECRET_FILE values (port absent: standalone).
void set_coord_config(const char* host, const char* port, const char* secret);
bool alloc_scratch();
// Gives the pages a checkpoint touched in the scratch back to the kernel (at its resume).
void scratch_release();
void install_handler();
// quiesce.cpp
// Signals and waits for every other thread. False (threads released) on timeout.
bool suspend_all(char* err, size_t err_len);
void release_all();
extern "C" void revive_handler(int sig, void* info, void* uc);
// Per-thread fix-ups in a restored thread: robust list, rseq.
void restored_thread_fixup(const image::ThreadRecord& r);
// A restart as an ordinary user (in a user namespace) kept CAP_CHECKPOINT_RESTORE for revive-restart
// (REVIVE_DROP_CAPS=1, plugins/proctree/tree_ns.cpp); the program had no capabilities, so every restored
// thread gives them up (capabilities are per thread). Raw system calls: runs in the signal handler.
void drop_restart_caps();
// maps.cpp: fills g.regions from /proc/self/maps and g.proc from /proc/self/stat. Returns region count
// or -errno.
long read_maps(image::ProcessInfo* pi);
// writer.cpp: writes the image for generation `gen` into `path` (tmp + fsync + rename + dir fsync).
// Returns bytes written or -errno with a message.
long write_image(const char* dir, const char* path, uint64_t gen, bool forked, char* err, size_t err_len);
// plugin_host.cpp
bool plugins_init();
bool plugins_save(char* err, size_t err_len);
void plugins_resume(bool ok);
// Restored process: the coordinator's resume arrived (every peer refilled); before user threads run.
void plugins_restored(uint64_t gen);
void plugins_free_output();
// PHASE drain/reconnect/refill: that event of every plugin, in list order; false at the first failure.
bool plugins_phase(const char* name, uint64_t gen, char* err, size_t err_len);
bool plugins_restore(const image::RestartInfo& ri, char* err, size_t err_len);
// compress.cpp: zstd loaded at init; compress_ready() builds the context in scratch (again after a restart).
bool compress_load();
bool compress_ready();
size_t compress_bound(size_t n);
long compress_chunk(const void* src, size_t n, void* dst, size_t cap);
// A context of its own in `arena` (len bytes, scratch), for a worker; nullptr on failure.
void* compress_ctx_new(void* arena, size_t len);
long compress_with(void* ctx, const void* src, size_t n, void* dst, size_t cap);
// zworkers.cpp: workers compressing chunks in parallel while one image is written (write_image only).
// zw_start returns how many workers run (0: compress inline); out_cap = one compressed chunk's bound.
// Jobs are collected in submission order: zw_oldest waits for the oldest one, zw_pop frees its slot.
uint32_t zw_start(uint32_t want, size_t out_cap);
bool zw_full();
bool zw_empty();
void zw_submit(uint32_t chunk, const void* src, uint64_t len);
void zw_oldest(uint32_t* chunk, const void** data, uint64_t* stored);
void zw_pop();
void zw_stop();  // workers exited and their memory unmapped when it returns
void zw_forget_restored();  // first thing of every image: drops a pool left in a restored image's memory
uint32_t zw_default_threads();  // online CPUs (at init: uses libc)
// checkpoint.cpp
// One checkpoint of this process into generation `gen`. Returns 1 when it returns in a restored process,
// 0 after a successful checkpoint (resumed), -1 on failure (resumed, message in err).
int checkpoint_now(uint64_t gen, char* image_path, size_t path_cap, char* err, size_t err_len);
// The same in steps, for the coordinator's phases. ckpt_write returns 1 in a restored process, 0 when the
// image at `path` is durable (bytes set), -1 on failure. With REVIVE_FORK it resumes the program itself
// (once the writer has read the shared memory objects; if the process maps any and !wait_writer, only at
// the coordinator's resume phase, when every process's writer has read them); then, unless wait_writer, it returns 0 as soon as the writer child exists (g.writer_pid; bytes 0), and
// writer_reap tells when the image is durable.
bool ckpt_suspend(char* err, size_t err_len);
int ckpt_write(uint64_t gen, const char* dir, char* path, size_t path_cap, long* bytes, char* err, size_t err_len,
               bool wait_writer = true);
// The pending writer: 0 while it runs (or none: *bytes -1), 1 when it wrote its image (reaped, *bytes
// set), -1 when it failed (reaped, err says so). Never blocks.
int writer_reap(long* bytes, char* err, size_t err_len);
void ckpt_resume(bool ok);
// Restored process, checkpoint thread: fix-ups, restarter cleanup, plugin restore. Threads stay parked
// until release_all(); then after_restore_done() drops the hand-over block.
void after_restore();
// A restored process that cannot be restored (or whose restart phase failed): says why on its stderr,
// has the restart's coordinator end the restart (which `revive restart` reports), and exits with 125.
[[noreturn]] void restore_failed(const char* err);
void after_restore_done();
const char* blob_env(const image::RestartInfo& ri, const char* key);
// coord_link.cpp
bool coord_configured();
bool coord_connected();
// The first connection of this process image (constructor), unless one exists (exec'ed image).
void coord_start();
// Handles the coordinator's frames until none is waiting and no checkpoint is in progress, or until the
// coordinator is lost (the engine then goes on standalone).
void coord_serve();
// True when the coordinator socket has data (or EOF) waiting.
bool coord_readable();
// True when PHASE durable waits for a forked writer that has exited (or for none): serve again.
bool coord_durable_ready();
// At exit (atexit, init.cpp): a process leaving while its forked writer still writes waits for it and
// reports the image now (PHASE_DONE durable, early if the phase has not come), so that its exit does not
// fail the generation. Call with the serving flag held and signals blocked.
void coord_exit_report();
// At exit, last: tell the coordinator this process leaves by exit() (BYE), so that it is not taken for
// one that was killed or crashed, then forget the connection. Same conditions as coord_exit_report.
void coord_say_bye(int status);  // BYE how=exit status=<exit status>
// The program's dup2/dup3 onto the coordinator socket's number moved it to fd (fd_guard.cpp).
void coord_moved(int fd);
// Restored process, after after_restore(): reconnect (threads then wait for resume) or release at once.
void restored_continue();
// In a fork child: forget the parent's connection (close only our copy of its socket) without
// connecting; coord_connected() is false until this process says its own HELLO.
void coord_drop_inherited();

// fork_child.cpp. A lazily joining fork child (g.join_pending): join now, send the parent its byte. With
// the serving flag held and every signal blocked (serve_main does it first of all).
void join_finish();

}  // namespace revive::inject
