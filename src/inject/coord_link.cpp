// The process side of the coordinator protocol (docs/contracts.md): HELLO when the process image starts,
// then, served inside the checkpoint signal's handler (init.cpp) whenever the socket has data, PHASE
// suspend -> drain -> write -> resume for a checkpoint, and after a restart HELLO restart=1 with our upid
// and reconnect -> refill -> resume before user threads run again. The socket is O_ASYNC with the
// checkpoint signal as its F_SETSIG signal, owned by the process. Losing the coordinator never stops the
// program: suspended threads are let go and the engine falls back to standalone mode.
#include <fcntl.h>
#include <new>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "inject/fork_path.h"
#include "coord/client.h"
#include "inject/engine.h"
#include "inject/hooks.h"
#include "inject/plugin.h"
#include "inject/sys.h"
#include "plugins/proctree/engine_hooks.h"

namespace revive::proctree {
// The proctree plugin's (src/plugins/proctree/pending.cpp): pokes this process's fork children that have
// not joined yet and waits a bounded time for them. Null without the plugin.
void children_join_now() __attribute__((weak));
}  // namespace revive::proctree

namespace revive::inject {
namespace {

coord::Client g_client;  // constant-initialised (no constructor runs), trivially destructible
// The process that made g_client's connection: a fork child holds its parent's socket until it says
// HELLO itself, and must never speak on it (a BYE there would drop the parent).
int g_client_pid;

struct LinkState {
  bool suspended;        // our threads are parked for the coordinator's checkpoint
  bool restored_parked;  // restored threads wait for the coordinator's resume
  bool write_ok;
  bool durable_waiting;  // PHASE durable received, answered once the forked writer is done
  uint32_t durable_seq;
  // PHASE suspend received but not answered: the application's hooks defer it (checkpoint callbacks
  // running, a critical section open; hooks.cpp). Served again on every wake-up until decided.
  bool suspend_deferred;
  uint32_t suspend_seq;
  uint64_t suspend_at_ns;
};
LinkState g_st;
// The coordinator's --phase-timeout (WELCOME phase_timeout; 0 from an older coordinator): a deferred
// suspend must be answered well before it, or the coordinator drops us.
uint64_t g_phase_timeout_s;

// 0 until this process's first connection attempt (on the checkpoint thread) has ended, then 1. fork()
// waits for it: a child that connected, lived briefly and left before its parent ever connected would
// leave the coordinator with no process, and it would exit (--exit-on-last) under a running program.
volatile uint32_t g_first_attempt_done;

void first_attempt_done() {
  __atomic_store_n(&g_first_attempt_done, 1u, __ATOMIC_RELEASE);
  sys::futex_wake(&g_first_attempt_done);
}

// Data, EOF or an error on the socket raise the checkpoint signal for the whole process.
void arm_async(int fd) {
  struct {
    int type, pid;
  } owner = {1 /*F_OWNER_PID*/, sys::getpid()};
  sys::sc(SYS_fcntl, fd, 10 /*F_SETSIG*/, g.cfg.sig);
  sys::sc(SYS_fcntl, fd, 15 /*F_SETOWN_EX*/, &owner);
  long fl = sys::sc(SYS_fcntl, fd, F_GETFL);
  if (fl >= 0) sys::sc(SYS_fcntl, fd, F_SETFL, fl | O_ASYNC);
  if (coord_readable()) wake_up();  // what came before O_ASYNC raised nothing
}

bool connect(bool restart) {
  coord::ClientOptions o;
  o.host = g.cfg.coord_host;
  o.port = g.cfg.coord_port;
  o.secret_file = g.cfg.secret_file;
  o.role = "proc";
  o.prog = g.cfg.prog;
  o.host_id = g.cfg.host_id;
  o.mpi_rank = g.cfg.mpi_rank;
  o.restart = restart;
  o.upid = restart ? g.upid : 0;
  o.min_fd = 100;  // keep the program's low descriptor numbers free
  coord::Welcome w;
  if (!g_client.connect(o, &w)) {
    sys::log(0, "coordinator: ", g_client.error());
    g_client.close();
    return false;
  }
  g.coord_fd = g_client.fd();
  g_client_pid = int(sys::getpid());
  g.upid = w.upid;
  if (w.ckpt_dir[0] == '/') {
    g.cfg.ckpt_dir[0] = 0;
    sys::append(g.cfg.ckpt_dir, sizeof g.cfg.ckpt_dir, w.ckpt_dir);
  }
  // zstd was loaded at init when a coordinator is configured (never dlopen here: it allocates).
  g.cfg.compress = w.compress && compress_ready();
  g.cfg.fork = w.fork;
  g.joined_outside = w.outside;
  g_phase_timeout_s = w.phase_timeout;
  // Level 2: every exec'd program of a script or a make says this; at launch's default level 1 it would
  // be a line of the program's stderr per process.
  sys::log(2, restart ? "reconnected to the coordinator" : "connected to the coordinator");
  arm_async(g.coord_fd);
  return true;
}

void reply(uint32_t seq, const char* name, bool ok, const char* err, const char* image, long bytes,
           bool retry = false) {
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kPhaseDone, seq);
  b.add("name", name).add("ok", ok ? "1" : "0");
  if (!ok) b.add("error", err && *err ? err : "unknown error");
  if (!ok && retry) b.add("retry", "1");  // refused for now: the coordinator takes the generation again
  if (image) b.add("image", image).add_u64("bytes", uint64_t(bytes));
  if (!g_client.send(b)) sys::log(0, "coordinator: ", g_client.error());
}

void let_go() {
  if (g_st.suspended) ckpt_resume(false);
  g_st.suspended = false;
  if (g_st.suspend_deferred) hooks_finish(-1);
  g_st.suspend_deferred = false;
  if (g_st.restored_parked) {
    release_all();
    after_restore_done();
    hooks_finish(1);
  }
  g_st.restored_parked = false;
}

void lost() {
  sys::log(0, "coordinator lost: ", g_client.error(), "; the program keeps running");
  let_go();
  g_client.close();
  g.coord_fd = -1;
  arm_interval_timer();  // standalone from now on
}

// PHASE suspend, now or again after a deferral: once the hooks let it go, suspend and answer.
void try_suspend() {
  char err[512] = "";
  uint64_t hard = 0;
  if (g_phase_timeout_s) hard = g_st.suspend_at_ns + g_phase_timeout_s * 900000000u;  // 90 % of it
  int r = hooks_prepare(hard, err, sizeof err);
  g_st.suspend_deferred = r == 0;
  if (r == 0) return;
  if (r > 0) g_st.suspended = ckpt_suspend(err, sizeof err);
  // Our threads are parked (no new fork starts) and the coordinator still waits for this suspend, so a
  // lazily joining fork child poked now joins during suspend and is in the generation.
  if (r > 0 && g_st.suspended && proctree::children_join_now) proctree::children_join_now();
  reply(g_st.suspend_seq, "suspend", r > 0 && g_st.suspended, err, nullptr, 0);
  if (r < 0) sys::log(1, "checkpoint refused: ", err);
  if (r < 0 || !g_st.suspended) hooks_finish(-1);
}

bool eq(const char* a, const char* b) { return sys::slen(a) == sys::slen(b) && sys::starts_with(a, b); }

// PHASE drain/reconnect/refill: the plugins' events of that name (they may talk to their peers).
// In a restart (this process restored, parked until resume) a failed phase leaves the process on a
// half-made channel (a connection nobody answers, bytes lost): it ends the restart as a failed restore
// does, naming the reason, instead of running on. Before 2026-11-29 the restored processes were resumed
// regardless and `revive restart` said nothing (hosts.migrate_reconnect: a backlog client that could not
// reach its listener read an empty answer).
void plugin_phase(uint32_t seq, const char* name, uint64_t gen) {
  char err[512] = "";
  bool ok = plugins_phase(name, gen, err, sizeof err);
  // REVIVE_TEST_FAIL_PHASE=<phase> in `revive restart`'s environment: that restart phase fails here, for
  // tests of what a failed restart phase does (tests/cli/restart_phase_fail_test.sh).
  if (const char* t = g_st.restored_parked ? restart_env("REVIVE_TEST_FAIL_PHASE") : nullptr; ok && t && eq(t, name)) {
    ok = false;
    sys::append(err, sizeof err, "failure injected by REVIVE_TEST_FAIL_PHASE");
  }
  if (!ok && g_st.restored_parked) {
    char why[600] = "";
    sys::append(why, sizeof why, "phase ");
    sys::append(why, sizeof why, name);
    sys::append(why, sizeof why, " of the restart: ");
    sys::append(why, sizeof why, err);
    restore_failed(why);
  }
  reply(seq, name, ok, err, nullptr, 0);
}

// PHASE durable (forked checkpoints): answered with the image once the writer child has exited, which
// the child's exit signal (the checkpoint signal) brings us back to see; at once when there is none.
void durable_poll() {
  if (!g_st.durable_waiting) return;
  char err[512] = "";
  long bytes = 0;
  const bool had_writer = g.writer_pid > 0;
  int r = writer_reap(&bytes, err, sizeof err);
  if (had_writer && r == 0) return;  // still writing
  g_st.durable_waiting = false;
  if (r == 1) sys::log(2, "image written by the forked writer: ", g.writer_path);  // (tlevels.crash_fork looks)
  reply(g_st.durable_seq, "durable", r >= 0, err, r == 1 ? g.writer_path : nullptr, bytes);
}

}  // namespace

bool coord_durable_ready() {
  if (!g_st.durable_waiting) return false;
  if (g.writer_pid <= 0) return true;
  siginfo_t si;
  si.si_pid = 0;
  // WEXITED | WNOHANG | WNOWAIT | __WALL: has it exited? (reaped by durable_poll, not here)
  long r = sys::sc(SYS_waitid, P_PID, g.writer_pid, &si, 4 | 1 | 0x01000000 | 0x40000000, 0);
  return r < 0 || si.si_pid != 0;
}

void coord_exit_report() {
  if (g.writer_pid <= 0 || g.writer_parent != sys::getpid() || !g_client.connected()) return;
  siginfo_t si;
  // WEXITED | WNOWAIT | __WALL, blocking: the image is written (writer_reap reaps it below).
  while (sys::sc(SYS_waitid, P_PID, g.writer_pid, &si, 4 | 0x01000000 | 0x40000000, 0) == -4) {
  }
  if (g_st.durable_waiting) {  // the phase came already: its answer
    durable_poll();
    return;
  }
  char err[512] = "";
  long bytes = 0;
  int r = writer_reap(&bytes, err, sizeof err);
  // Early: the coordinator keeps it for the durable phase of this generation.
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kPhaseDone, 0);
  b.add("name", "durable").add("ok", r >= 0 ? "1" : "0").add_u64("generation", g.generation).add("early", "1");
  if (r < 0) b.add("error", err[0] ? err : "the forked writer failed");
  if (r == 1) b.add("image", g.writer_path).add_u64("bytes", uint64_t(bytes));
  if (!g_client.send(b)) sys::log(0, "coordinator: ", g_client.error());
}

void coord_say_bye(int status) {
  if (!g_client.connected() || g_client_pid != int(sys::getpid())) return;
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kBye, 0);
  // status is required by the wire: without it the coordinator answered a protocol error and dropped
  // the process as if it had died (unseen while the client closed right after its BYE).
  b.add("how", "exit").add_i64("status", status);
  if (!g_client.send(b)) sys::log(1, "coordinator: ", g_client.error());
  // The connection stays open until the kernel closes it at the end of the exit: until then this process
  // is still a member and still takes part in checkpoints (its parent may not have waited for it yet).
}

bool coord_publish(const char* key, const char* value) {
  if (!g_client.connected()) return false;
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kPublish, g_client.next_seq());
  b.add("key", key).add("value", value);
  return g_client.send(b);
}

namespace {

// Sends the LOOKUP built in the client's buffer and waits for its VALUE (same seq) until timeout_ms: 1 with
// *p filled, 0 timed out, -1 connection lost. A KILL meanwhile ends the process, as everywhere.
int await_value(coord::FrameBuilder& b, uint32_t seq, int timeout_ms, coord::Payload* p) {
  if (!g_client.send(b)) return -1;
  const uint64_t deadline = now_ns() + uint64_t(timeout_ms) * 1000000;
  for (;;) {
    uint64_t now = now_ns();
    if (now >= deadline) return 0;
    coord::FrameHeader h;
    int r = g_client.recv(&h, p, int((deadline - now) / 1000000) + 1);
    if (r <= 0) return r;
    if (h.type == coord::kKill) sys::sc(SYS_kill, sys::getpid(), SIGKILL);
    if (h.type == coord::kValue && h.seq == seq) return 1;  // others: e.g. a late answer to an earlier wait
  }
}

}  // namespace

int coord_lookup(const char* key, bool wait, int timeout_ms, char* value, size_t cap) {
  if (!g_client.connected()) return -1;
  uint32_t seq = g_client.next_seq();
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kLookup, seq);
  b.add("key", key).add("wait", wait ? "1" : "0");
  coord::Payload p;
  int r = await_value(b, seq, timeout_ms, &p);
  if (r <= 0) return r;
  uint64_t found = 0;
  p.get_u64("found", &found);
  if (!found) return 0;
  if (cap) value[0] = 0;
  p.get_str("value", value, cap);
  return 1;
}

int coord_next(const char* prefix, const char* after, int timeout_ms, char* key, size_t key_cap, char* value,
               size_t value_cap) {
  if (!g_client.connected()) return -1;
  uint32_t seq = g_client.next_seq();
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kLookup, seq);
  b.add("key", after).add("prefix", prefix).add("wait", "0").add("next", "1");
  coord::Payload p;
  if (await_value(b, seq, timeout_ms, &p) != 1) return -1;
  uint64_t found = 0;
  p.get_u64("found", &found);
  if (!found) return 0;
  if (key_cap) key[0] = 0;
  if (value_cap) value[0] = 0;
  // A key that does not fit is an error, not a shorter key (the caller walks on from it).
  if (!p.get_str("key", key, key_cap)) return -1;
  p.get_str("value", value, value_cap);
  return 1;
}

long coord_count(const char* prefix, int timeout_ms) {
  if (!g_client.connected()) return -1;
  uint32_t seq = g_client.next_seq();
  coord::FrameBuilder b(g_client.tx_buffer(), coord::Client::kTxCap, coord::kLookup, seq);
  b.add("key", prefix).add("wait", "0").add("count", "1");
  coord::Payload p;
  if (await_value(b, seq, timeout_ms, &p) != 1) return -1;
  uint64_t n = 0;
  return p.get_u64("value", &n) ? long(n) : -1;
}

int coord_socket() { return g_client.connected() ? g_client.fd() : -1; }

uint64_t coord_upid() { return g.cfg.coord_port != 0 ? g.upid : 0; }

bool coord_configured() { return g.cfg.coord_port != 0; }

bool coord_connected() { return g_client.connected(); }

bool coord_readable() {
  const int fd = g.coord_fd;
  if (fd < 0) return false;
  struct pollfd p = {fd, POLLIN, 0};
  return sys::sc(SYS_poll, &p, 1, 0) > 0;
}

void coord_start() {
  if (!g_client.connected()) connect(false);
  first_attempt_done();
}

// Before an exec in this process (src/plugins/proctree): until the new image's constructor installs the
// handler, the checkpoint signal has its default action (terminate). Ignoring it drops what is pending
// and keeps it harmless across the exec (an ignored signal stays ignored; the new engine installs its
// handler); the socket the new image inherits stops raising it. Undone if exec fails.
void before_exec() {
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  } ign = {reinterpret_cast<void*>(SIG_IGN), 0, nullptr, 0};
  sys::sc(SYS_rt_sigaction, g.cfg.sig, &ign, nullptr, 8);
  if (g.coord_fd >= 0) {
    long fl = sys::sc(SYS_fcntl, g.coord_fd, F_GETFL);
    if (fl >= 0) sys::sc(SYS_fcntl, g.coord_fd, F_SETFL, fl & ~long(O_ASYNC));
  }
}

void coord_moved(int fd) {
  g_client.renumber(fd);
  g.coord_fd = fd;
  arm_async(fd);  // F_SETSIG/F_SETOWN/O_ASYNC belong to the file description, but say it again
}

void after_failed_exec() {
  install_handler();
  if (g.coord_fd >= 0) arm_async(g.coord_fd);
}

// A new process of the computation, now (fork child, exec'ed image: src/plugins/proctree). An inherited
// connection is the parent's: forget it, closing only our copy of the socket, and say HELLO ourselves.
REVIVE_FORK_PATH void coord_drop_inherited() {
  int fd = g_client.fd();
  g_client.forget();
  // Field by field, only what is set: every page written is a copy-on-write fault of every fork.
  sys::set_if(g_st.suspended, false);
  sys::set_if(g_st.restored_parked, false);
  sys::set_if(g_st.write_ok, false);
  sys::set_if(g_st.durable_waiting, false);
  sys::set_if(g_st.durable_seq, 0);
  sys::set_if(g_st.suspend_deferred, false);
  sys::set_if(g_st.suspend_seq, 0);
  sys::set_if(g_st.suspend_at_ns, 0);
  g.coord_fd = -1;
  if (fd >= 0) sys::sc(SYS_close, fd);
}

bool coord_connect_now(bool drop_inherited) {
  if (drop_inherited) coord_drop_inherited();
  return coord_configured() && connect(false);
}

// Restored process: the old connection belongs to a dead process. Forget it (its descriptor number
// means nothing here) and say hello again; without a coordinator the threads go at once.
void restored_continue() {
  new (&g_client) coord::Client();
  g.coord_fd = -1;
  g_st = LinkState{};
  if (coord_configured() && connect(true)) {
    g_st.restored_parked = true;
    return;
  }
  release_all();
  after_restore_done();
  hooks_finish(1);
}

void coord_wait_connected(int timeout_ms) {
  // Every fork asks: once connected, no clock read (a system call here).
  if (!coord_configured() || __atomic_load_n(&g_first_attempt_done, __ATOMIC_ACQUIRE)) return;
  const uint64_t deadline = now_ns() + uint64_t(timeout_ms) * 1000000;
  while (!__atomic_load_n(&g_first_attempt_done, __ATOMIC_ACQUIRE)) {
    uint64_t now = now_ns();
    if (now >= deadline) return;
    sys::futex_wait(&g_first_attempt_done, 0, long(deadline - now));
  }
}

void coord_serve() {
  char name[32], dir[1200], path[1400], err[512];
  durable_poll();
  if (g_st.suspend_deferred) try_suspend();
  for (;;) {
    coord::FrameHeader h;
    coord::Payload p;
    // Within a checkpoint (ours or a restored one) wait for the next phase; otherwise only take what is
    // already there and give the thread back to the program.
    const bool busy = g_st.suspended || g_st.restored_parked;
    int r = g_client.recv(&h, &p, busy ? -1 : 0);
    if (r == 0 && !busy) return;
    if (r <= 0) {
      lost();
      return;
    }
    if (h.type == coord::kKill) sys::sc(SYS_kill, sys::getpid(), SIGKILL);
    if (h.type == coord::kError) {
      char reason[256] = "";
      p.get_str("reason", reason, sizeof reason);
      sys::log(0, "coordinator says: ", reason);
      continue;
    }
    if (h.type != coord::kPhase) continue;
    name[0] = dir[0] = err[0] = 0;
    uint64_t gen = 0;
    p.get_str("name", name, sizeof name);
    p.get_u64("generation", &gen);
    p.get_str("dir", dir, sizeof dir);
    if (eq(name, "suspend")) {
      g_st.suspend_seq = h.seq;
      g_st.suspend_at_ns = now_ns();
      try_suspend();
    } else if (eq(name, "write")) {
      if (!g_st.suspended || dir[0] != '/') {
        reply(h.seq, name, false, g_st.suspended ? "PHASE write without an absolute dir" : "write before suspend",
              nullptr, 0);
        continue;
      }
      if (uint64_t ms = g.test_die_in_write) {
        struct timespec ts = {time_t((ms - 1) / 1000), long((ms - 1) % 1000) * 1000000};
        sys::sc(SYS_nanosleep, &ts, nullptr);
        sys::sc(SYS_kill, sys::getpid(), SIGKILL);
      }
      sys::sc(SYS_mkdir, dir, 0700);
      long bytes = 0;
      // Forked: answered as soon as the writer exists; the image comes with PHASE durable.
      int rc = ckpt_write(gen, dir, path, sizeof path, &bytes, err, sizeof err, /*wait_writer=*/!g.cfg.fork);
      if (rc == 1) {  // restored process, new coordinator connection
        after_restore();
        restored_continue();
        if (!g_st.restored_parked) return;
        continue;
      }
      g_st.write_ok = rc == 0;
      reply(h.seq, name, rc == 0, err, rc == 0 && !g.cfg.fork ? path : nullptr, bytes, rc != 0 && g.save_again);
    } else if (eq(name, "resume")) {
      if (g_st.restored_parked) {
        plugins_restored(gen);
        release_all();
        after_restore_done();
        g_st.restored_parked = false;
        hooks_finish(1);
      } else if (g_st.suspended) {
        ckpt_resume(g_st.write_ok);
        g_st.suspended = false;
      }
      reply(h.seq, name, true, nullptr, nullptr, 0);
    } else if (eq(name, "durable")) {
      g_st.durable_waiting = true;
      g_st.durable_seq = h.seq;
      durable_poll();
    } else if (eq(name, "drain") || eq(name, "reconnect") || eq(name, "refill")) {
      plugin_phase(h.seq, name, gen);
    } else {
      reply(h.seq, name, true, nullptr, nullptr, 0);  // a phase this engine does not know
    }
  }
}

}  // namespace revive::inject
