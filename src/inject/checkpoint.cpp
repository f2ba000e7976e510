// One checkpoint, start to end, on the checkpoint thread: quiesce, save our own continuation, plugin
// sections, image (here or in a forked child), resume. And the other half: what the checkpoint thread
// does when it wakes up in a restored process.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "coord/client.h"
#include "inject/engine.h"
#include "inject/hooks.h"
#include "inject/sys.h"
#include "plugins/vpid/vpid.h"

namespace revive::inject {
namespace {

void image_dir(uint64_t gen, char* dir, size_t dir_cap) {
  dir[0] = 0;
  sys::append(dir, dir_cap, g.cfg.ckpt_dir);
  sys::append(dir, dir_cap, "/ckpt-");
  sys::append_u64(dir, dir_cap, gen);
}

}  // namespace

// Looks up KEY in the restarter's "KEY=VALUE\0..." block; nullptr if absent.
const char* blob_env(const image::RestartInfo& ri, const char* key) {
  if (!ri.env_len) return nullptr;
  const char* p = reinterpret_cast<const char*>(ri.blob_addr + ri.env_off);
  const char* end = p + ri.env_len;
  size_t kl = sys::slen(key);
  while (p < end && *p) {
    if (sys::starts_with(p, key) && p[kl] == '=') return p + kl + 1;
    p += sys::slen(p) + 1;
  }
  return nullptr;
}

namespace {

struct WriteArgs {
  const char* dir;
  const char* path;
  uint64_t gen;
  bool forked;
  char* err;
  size_t err_len;
};

long write_trampoline(void* p) {
  auto* a = static_cast<WriteArgs*>(p);
  return write_image(a->dir, a->path, a->gen, a->forked, a->err, a->err_len);
}

// The writer runs on an excluded scratch stack: every byte it saves then holds still while it is
// checksummed and written, the checkpoint thread's own stack included.
long write_on_scratch_stack(const char* dir, const char* path, uint64_t gen, bool forked, char* err, size_t n) {
  WriteArgs a = {dir, path, gen, forked, err, n};
  return revive_on_stack(write_trampoline, &a, g.wstack + g.wstack_len);
}

}  // namespace

bool ckpt_suspend(char* err, size_t err_len) {
  g.released = false;
  g.t_start_ns = now_ns();
  stderr_hold();  // until the resume: every process saves a shared stderr at one size
  bool ok = suspend_all(err, err_len);
  g.t_suspended_ns = now_ns();
  if (!ok) stderr_release();  // no resume follows a failed suspend
  return ok;
}

int ckpt_write(uint64_t gen, const char* dir, char* path, size_t path_cap, long* bytes, char* err, size_t err_len,
               bool wait_writer) {
  g.save_again = false;  // set by plugins_save when a plugin refuses for now (both callers read it)
  path[0] = 0;
  sys::append(path, path_cap, dir);
  sys::append(path, path_cap, "/");
  sys::append(path, path_cap, g.cfg.prog);
  sys::append(path, path_cap, "-");
  sys::append_u64(path, path_cap, g.upid);
  sys::append(path, path_cap, ".rimg");
  const uint64_t prev_gen = g.generation;
  g.generation = gen;
  sys::zero(&g.ckpt_rec, sizeof g.ckpt_rec);
  g.ckpt_rec.tid = uint64_t(sys::gettid());
  sys::sc(SYS_arch_prctl, 0x1003, &g.ckpt_rec.fs_base);
  sys::sc(SYS_get_robust_list, 0, &g.ckpt_rec.robust_head, &g.ckpt_rec.robust_len);
  g.ckpt_rec.tid_addr = g.ckpt_rec.fs_base + g.tid_offset;
  g.ckpt_rec.is_ckpt = 1;
  // The serving thread is a program thread, the leader too when the kernel picked it: the restarter then
  // continues as this record (src/restart/handover.cpp).
  g.ckpt_rec.is_main = g.ckpt_rec.tid == uint64_t(sys::getpid());
  vpid::thread_checkpoint();
  vpid::remember_incarnation();  // every other thread parked: their kernel ids in hand are this map's
  if (revive_save_ctx(g.ckpt_rec.ctx) != 0) return 1;  // we are the restored process

  g.gen_dir[0] = 0;
  sys::append(g.gen_dir, sizeof g.gen_dir, dir);
  bool saved = plugins_save(err, err_len);
  g.gen_dir[0] = 0;
  if (!saved) {
    g.generation = prev_gen;
    return -1;
  }
  if (g.cfg.fork) {
    // One writer at a time: the coordinator's durable barrier reaped the last one before this generation
    // began; a standalone checkpoint after a lost coordinator may find one still writing.
    if (g.writer_pid > 0) {
      int st = 0;
      while (sys::sc(SYS_wait4, g.writer_pid, &st, 0x40000000 /*__WALL*/, 0) == -4) {
      }
      g.writer_pid = 0;
    }
    // Forked checkpoint: the child writes from its copy-on-write snapshot while the program goes on.
    // An exit signal other than SIGCHLD makes it a "clone child" that the program's own wait() or
    // waitpid(-1) cannot reap; the checkpoint signal (si_code CLD_EXITED: "serve", never a trigger)
    // wakes the engine when the image is written, to report it (writer_reap, coord_link.cpp).
    int pass[2] = {-1, -1};
    if (sys::sc(SYS_pipe2, pass, O_CLOEXEC) != 0) pass[0] = pass[1] = -1;
    long child = sys::sc(SYS_clone, g.cfg.sig, 0, 0, 0, 0);
    if (child == 0) {
      stderr_forget();  // what the parent held is the parent's to write
      if (pass[0] >= 0) sys::sc(SYS_close, pass[0]);
      g.shm_pass_fd = pass[1];
      char cerr[512] = "";
      long w = write_on_scratch_stack(dir, path, gen, true, cerr, sizeof cerr);
      if (w < 0) sys::log(0, "forked checkpoint failed: ", cerr);
      sys::sc(SYS_exit_group, w < 0 ? 1 : 0);
    }
    // Shared memory is not frozen by the fork: the program waits until the writer has read it (a byte on
    // the pipe; EOF when it failed first). Under a coordinator, a process that maps shared memory waits
    // for the resume phase: another process's writer may still be reading a range this one maps.
    char said = '0';
    if (pass[1] >= 0) sys::sc(SYS_close, pass[1]);
    if (pass[0] >= 0) {
      while (child > 0 && sys::sc(SYS_read, pass[0], &said, 1) == -4) {
      }
      sys::sc(SYS_close, pass[0]);
    }
    if (!(said == '1' && !wait_writer) || child < 0) ckpt_resume(child > 0);
    if (child < 0) {
      sys::append(err, err_len, "fork for the checkpoint failed");
      g.generation = prev_gen;
      return -1;
    }
    if (!wait_writer) {
      g.writer_pid = child;
      g.writer_parent = sys::getpid();
      g.writer_path[0] = 0;
      sys::append(g.writer_path, sizeof g.writer_path, path);
      *bytes = 0;
      return 0;
    }
    int status = 0;
    while (sys::sc(SYS_wait4, child, &status, 0x40000000 /*__WALL*/, 0) == -4) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      sys::append(err, err_len, "the forked writer failed (see its message above)");
      g.generation = prev_gen;
      return -1;
    }
    struct stat st;
    *bytes = sys::sc(SYS_stat, path, &st) == 0 ? long(st.st_size) : 0;
    return 0;
  }
  *bytes = write_on_scratch_stack(dir, path, gen, false, err, err_len);
  if (*bytes < 0) {
    g.generation = prev_gen;
    return -1;
  }
  return 0;
}

int writer_reap(long* bytes, char* err, size_t err_len) {
  *bytes = -1;
  if (g.writer_pid <= 0) return 0;
  int status = 0;
  long r = sys::sc(SYS_wait4, g.writer_pid, &status, 0x40000000 /*__WALL*/ | WNOHANG, 0);
  if (r == 0 || r == -4) return 0;  // still writing
  g.writer_pid = 0;
  if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    sys::append(err, err_len, r < 0 ? "the forked writer was lost" : "the forked writer failed (see its message above)");
    return -1;
  }
  struct stat st;
  *bytes = sys::sc(SYS_stat, g.writer_path, &st) == 0 ? long(st.st_size) : 0;
  return 1;
}

void ckpt_resume(bool ok) {
  if (g.released) return;
  plugins_resume(ok);
  plugins_free_output();
  g.released = true;
  g.t_released_ns = now_ns();
  stderr_release();
  release_all();
  scratch_release();  // the others run meanwhile
  hooks_finish(0);  // the gate opens, the continue callbacks run
}

int checkpoint_now(uint64_t gen, char* path, size_t path_cap, char* err, size_t err_len) {
  g.save_again = false;  // a failure before ckpt_write is no refusal
  char dir[1200];
  image_dir(gen, dir, sizeof dir);
  sys::sc(SYS_mkdir, g.cfg.ckpt_dir, 0700);
  long r = sys::sc(SYS_mkdir, dir, 0700);
  if (r < 0 && r != -17 /*EEXIST*/) {
    sys::append(err, err_len, "cannot create directory ");
    sys::append(err, err_len, dir);
    return -1;
  }
  if (!ckpt_suspend(err, err_len)) return -1;
  long bytes = 0;
  int rc = ckpt_write(gen, dir, path, path_cap, &bytes, err, err_len);
  if (rc == 1) return 1;
  ckpt_resume(rc == 0);
  return rc;
}

// A restored process that cannot be restored: it says why and ends (exit 125), never running on half-made.
// Also for a restart phase (reconnect, refill) a plugin of a restored process failed (coord_link.cpp).
[[noreturn]] void restore_failed(const char* err) {
  char line[700] = "revive: restore failed: ";
  sys::append(line, sizeof line, err);
  sys::append(line, sizeof line, "\n");
  sys::write_all(2, line, sys::slen(line));
  // The other processes of the restart are parked until this one is back: have the coordinator end
  // them, or `revive restart` would wait forever.
  char why[300] = "";
  if (coord_configured() &&
      !coord::report_restore_failure(g.cfg.coord_host, g.cfg.coord_port, g.cfg.secret_file, g.upid, line + 8, why,
                                     sizeof why)) {
    char l2[400] = "revive: could not tell the restart's coordinator: ";
    sys::append(l2, sizeof l2, why[0] ? why : "?");
    sys::append(l2, sizeof l2, "\n");
    sys::write_all(2, l2, sys::slen(l2));
  }
  sys::sc(SYS_exit_group, 125);
  __builtin_unreachable();
}

// Runs on the checkpoint thread of a restored process, every other thread parked in the handler.
// Leaves them parked: the caller releases them (at once, or on the coordinator's resume).
void after_restore() {
  restored_thread_fixup(g.ckpt_rec);
  // The image was written while the original held its lines (it wrote them at its own resume): drop
  // those, and hold what the restore says until after_restore_done, when the threads go.
  stderr_forget();
  stderr_hold();
  // Plugin buffers and scratch were not in the image: forget them, do not unmap (addresses are stale).
  g.plugin_out_count = 0;
  const uint32_t users = g.nslots < kMaxThreads ? g.nslots : kMaxThreads;
  for (;;) {
    uint32_t n = __atomic_load_n(&g.restored, __ATOMIC_ACQUIRE);
    if (n >= users) break;
    sys::futex_wait(&g.restored, n, 100000000);
  }
  g.restored = 0;
  g.image_fd = -1;
  image::RestartInfo& ri = g_restart_info;
  // Every thread has left the restarter's code: drop its mappings.
  for (uint32_t i = 0; i < ri.unmap_count && i < image::kMaxUnmap; ++i)
    sys::sc(SYS_munmap, ri.unmap[i][0], ri.unmap[i][1] - ri.unmap[i][0]);
  char err[512] = "";
  // First (the previous incarnation's table is not mapped here: no wrapper may look at it), before the
  // plugins: the ids the program sees (REVIVE_VPID_TABLE: pids were not recreated).
  if (int r = vpid::restore(ri.magic == image::kRestartInfoMagic ? blob_env(ri, vpid::kEnv) : nullptr, err,
                            sizeof err);
      r != 0) {
    restore_failed(err);
  }
  install_handler();
  if (!alloc_scratch()) sys::log(0, "cannot reserve scratch memory after restart");
  if (ri.magic == image::kRestartInfoMagic) {
    if (const char* d = blob_env(ri, "REVIVE_CKPT_DIR"); d && d[0] == '/') {
      g.cfg.ckpt_dir[0] = 0;
      sys::append(g.cfg.ckpt_dir, sizeof g.cfg.ckpt_dir, d);
    }
    if (const char* v = blob_env(ri, "REVIVE_INTERVAL")) g.cfg.interval_s = uint32_t(sys::parse_dec(v));
    if (const char* v = blob_env(ri, "REVIVE_FORK")) g.cfg.fork = *v == '1';
    if (const char* v = blob_env(ri, "REVIVE_COMPRESS")) g.cfg.compress = *v == '1' && compress_ready();
    if (const char* v = blob_env(ri, "REVIVE_LOG")) g.cfg.log = int(sys::parse_dec(v));
    // The restart's coordinator (or none: standalone), never the dead process's.
    set_coord_config(blob_env(ri, "REVIVE_COORD_HOST"), blob_env(ri, "REVIVE_COORD_PORT"),
                     blob_env(ri, "REVIVE_SECRET_FILE"));
    g.cfg.host_id[0] = 0;  // the host we were restarted on (migration), not the one we were saved on
    if (const char* h = blob_env(ri, "REVIVE_HOST_ID")) sys::append(g.cfg.host_id, sizeof g.cfg.host_id, h);
  }
  // Before the plugins: the timer plugin recreates the program's POSIX timers, ours keeps its id.
  g.have_timer = false;
  arm_interval_timer();
  if (!plugins_restore(ri, err, sizeof err)) {
    restore_failed(err);
  }
  drop_restart_caps();  // after the fd plugin set /proc/self/exe back with it
  sys::log(1, "restored");
}

const char* restart_env(const char* key) {
  return g_restart_info.magic == image::kRestartInfoMagic ? blob_env(g_restart_info, key) : nullptr;
}

// "KEY=VALUE\0" entries for what an exec'ed descendant must know of this process's coordinator, from
// the engine's current config: a restored process's environment still names the dead launch's
// coordinator (its port, a host it no longer runs on), and a child exec'ed with it never joined the
// restart's coordinator (a `sleep` in a restarted shell script hung for good in its nanosleep while its
// engine retried the old port). Port 0 (standalone) writes no coordinator keys. Returns the bytes used.
size_t exec_coord_env(char* buf, size_t cap) {
  size_t used = 0;
  auto put = [&](const char* key, const char* val) {
    size_t kl = sys::slen(key), vl = sys::slen(val);
    if (used + kl + vl + 2 > cap) return;
    sys::copy(buf + used, key, kl);
    buf[used + kl] = '=';
    sys::copy(buf + used + kl + 1, val, vl);
    buf[used + kl + 1 + vl] = 0;
    used += kl + vl + 2;
  };
  if (g.cfg.ckpt_dir[0]) put("REVIVE_CKPT_DIR", g.cfg.ckpt_dir);
  if (g.cfg.host_id[0]) put("REVIVE_HOST_ID", g.cfg.host_id);
  if (g.cfg.coord_port) {
    char port[8] = "";
    sys::append_u64(port, sizeof port, g.cfg.coord_port);
    put("REVIVE_COORD_PORT", port);
    put("REVIVE_COORD_HOST", g.cfg.coord_host);
    put("REVIVE_SECRET_FILE", g.cfg.secret_file);
  }
  return used;
}

const char* generation_dir() { return g.gen_dir; }

const char* restored_image() {
  const image::RestartInfo& ri = g_restart_info;
  if (ri.magic != image::kRestartInfoMagic || ri.image_path_off >= ri.blob_len) return "";
  return reinterpret_cast<const char*>(ri.blob_addr + ri.image_path_off);
}

void after_restore_done() {
  stderr_release();  // without it a restored process held every later warning (lost, or late and stale)
  image::RestartInfo& ri = g_restart_info;
  if (ri.blob_addr) sys::sc(SYS_munmap, ri.blob_addr, ri.blob_len);
  ri.magic = 0;
  ri.blob_addr = ri.blob_len = 0;
}

}  // namespace revive::inject
