// Application hooks, the engine's half (docs/hooks.md): the one exported entry point of the injected
// library, and the deferral of a checkpoint request while checkpoint callbacks run on the hooks library's
// thread and while critical sections are open. Everything here runs in the checkpoint signal's handler
// (or is `notify`, called from program threads): raw system calls and atomics only, no allocation, no
// lock, and nothing ever calls into the hooks library.
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include "inject/fork_path.h"
#include "hooks/hooks_abi.h"
#include "inject/engine.h"
#include "inject/hooks.h"
#include "inject/sys.h"

namespace revive::inject {
namespace {

enum Stage : uint32_t { kIdle, kCallbacks, kGate, kTaking };

// Zero-initialised, in every image with the rest of the engine (its pointer stays valid: the hooks
// library's block is restored at the same address).
struct HookState {
  revive_hooks_shared* sh;
  Stage stage;
  uint32_t ckpt_req;        // the request whose callbacks we wait for
  uint32_t poke, poke_seen; // notify() calls, and how many a prepare() has looked at
  uint64_t cb_ns;           // when the checkpoint callbacks were asked for
  uint64_t gate_ns;         // when the wait for critical sections began
  uint64_t deadline_ns;
  bool have_timer;
  int timer;
};
HookState h;

// The engine's own block of critical sections, for plugins whose wrappers call into a library that must
// not be stopped half-way (the verbs plugin: a thread stopped inside the device library would resume in
// it against objects the restart re-created). Same protocol as the hooks library's block (only `inside`,
// `gate` and `want_wake` are used); a checkpoint waits for both. Zero until a plugin uses it.
revive_hooks_shared g_internal;
bool internal_used() { return __atomic_load_n(&g_internal.abi, __ATOMIC_SEQ_CST) != 0; }

uint32_t load(volatile uint32_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
void store(volatile uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

uint32_t wake_thread(volatile uint32_t* req) {
  const uint32_t v = __atomic_add_fetch(req, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&h.sh->event, 1, __ATOMIC_SEQ_CST);
  sys::futex_wake(&h.sh->event);
  return v;
}

void disarm() {
  if (!h.have_timer) return;
  sys::sc(SYS_timer_delete, h.timer);  // never in an image: its id could be one the timer plugin restores
  h.have_timer = false;
}

// A one-shot POSIX timer (raw: invisible to the timer plugin) sending the checkpoint signal at the
// deadline, so that a section that never ends fails the checkpoint instead of leaving it waiting.
void arm(uint64_t at_ns) {
  if (!h.have_timer) {
    if (!signal_timer_create(&h.timer)) return;
    h.have_timer = true;
  }
  struct itimerspec its = {{0, 0}, {time_t(at_ns / 1000000000u), long(at_ns % 1000000000u)}};
  sys::sc(SYS_timer_settime, h.timer, 1 /*TIMER_ABSTIME*/, &its, nullptr);
}

void open_gate(revive_hooks_shared* b) {
  store(&b->want_wake, 0);
  store(&b->gate, 0);
  sys::futex_wake(&b->gate);
}

void append_seconds(char* buf, size_t cap, uint64_t ns) {
  const uint64_t tenths = (ns + 50000000u) / 100000000u;
  sys::append_u64(buf, cap, tenths / 10);
  sys::append(buf, cap, ".");
  sys::append_u64(buf, cap, tenths % 10);
  sys::append(buf, cap, " s");
}

// "process 4242 (solver) was in a critical section for 30.0 s (timeout 30.0 s, REVIVE_CRITICAL_TIMEOUT)"
// "process 4242 (solver)"
void process_name(char* err, size_t n) {
  char comm[17] = "";
  sys::sc(SYS_prctl, PR_GET_NAME, comm, 0, 0, 0);
  err[0] = 0;
  sys::append(err, n, "process ");
  sys::append_u64(err, n, uint64_t(sys::getpid()));
  sys::append(err, n, " (");
  sys::append(err, n, comm);
  sys::append(err, n, ")");
}

void timeout_message(char* err, size_t n, uint64_t waited_ns, uint64_t limit_ns, bool cut) {
  process_name(err, n);
  sys::append(err, n, " was in a critical section for ");
  append_seconds(err, n, waited_ns);
  sys::append(err, n, cut ? " (cut short by the coordinator's phase timeout: " : " (timeout ");
  append_seconds(err, n, limit_ns);
  sys::append(err, n, cut ? ")" : ", REVIVE_CRITICAL_TIMEOUT or revive_set_critical_timeout)");
  sys::append(err, n, "; checkpoint not taken, the program goes on");
}

void callbacks_message(char* err, size_t n, uint64_t waited_ns) {
  process_name(err, n);
  sys::append(err, n, ": its checkpoint callbacks did not return within ");
  append_seconds(err, n, waited_ns);
  sys::append(err, n, " (cut short by the coordinator's phase timeout); checkpoint not taken, the program goes on");
}

void notify() {
  __atomic_add_fetch(&h.poke, 1, __ATOMIC_SEQ_CST);
  wake_up();
}

int attach(revive_hooks_shared* sh) {
  if (!sh || sh->abi != REVIVE_HOOKS_ABI) return -1;
  revive_hooks_shared* none = nullptr;
  if (__atomic_compare_exchange_n(&h.sh, &none, sh, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return 0;
  return none == sh ? 0 : -1;
}

constexpr revive_hooks_engine kEngine = {REVIVE_HOOKS_ABI, attach, notify};

}  // namespace

revive_hooks_shared* internal_sections() {
  __atomic_store_n(&g_internal.abi, uint32_t(REVIVE_HOOKS_ABI), __ATOMIC_SEQ_CST);
  return &g_internal;
}

void internal_sections_notify() { notify(); }

int hooks_prepare(uint64_t hard_deadline_ns, char* err, size_t err_len) {
  revive_hooks_shared* const sh = h.sh;
  revive_hooks_shared* const in = internal_used() ? &g_internal : nullptr;
  if (!sh && !in) return 1;
  if (h.stage == kTaking) return 1;  // already decided (a second request joins this one)
  if (h.stage == kIdle) {
    if (sh && load(&sh->thread)) {
      h.stage = kCallbacks;
      h.cb_ns = now_ns();
      h.ckpt_req = wake_thread(&sh->ckpt_req);
    } else {
      h.stage = kGate;
    }
    h.gate_ns = 0;
  }
  if (h.stage == kCallbacks) {  // sh != nullptr here
    if (int32_t(load(&sh->ckpt_done) - h.ckpt_req) < 0) {  // notify() comes when they are done
      if (!hard_deadline_ns) return 0;
      const uint64_t now = now_ns();
      if (now < hard_deadline_ns) {
        arm(hard_deadline_ns);
        return 0;
      }
      // Answer the coordinator before it drops us; the callbacks finish on their thread, and the continue
      // callbacks asked for by hooks_finish run after them.
      callbacks_message(err, err_len, now - h.cb_ns);
      return -1;
    }
    h.stage = kGate;
    if (g.cfg.log >= 2) {  // the whole round trip through the hooks thread (bench/hooks reads it)
      char t[32] = "";
      sys::append_u64(t, sizeof t, (now_ns() - h.cb_ns) / 1000);
      sys::log(2, "checkpoint: the checkpoint callbacks took ", t, " us");
    }
  }
  // kGate: no new section may begin, and we wait for the open ones to end (the last end calls notify).
  const uint64_t now = now_ns();
  if (h.gate_ns == 0) {
    h.gate_ns = now;
    uint64_t t = sh ? load(&sh->timeout_ms) : 0;
    if (t == 0) t = 30000;
    h.deadline_ns = now + t * 1000000u;
    if (sh) store(&sh->gate, 1);
    if (in) store(&in->gate, 1);
  }
  if (sh) store(&sh->want_wake, 1);
  if (in) store(&in->want_wake, 1);
  if ((!sh || load(&sh->inside) == 0) && (!in || load(&in->inside) == 0)) {
    if (sh) store(&sh->want_wake, 0);
    if (in) store(&in->want_wake, 0);
    if (h.have_timer) {  // it waited (REVIVE_LOG=2 says how long)
      char t[32] = "";
      append_seconds(t, sizeof t, now - h.gate_ns);
      sys::log(2, "checkpoint: the critical sections ended after ", t);
    }
    disarm();
    h.stage = kTaking;  // the gate stays closed until hooks_finish
    return 1;
  }
  const bool cut = hard_deadline_ns && hard_deadline_ns < h.deadline_ns;
  const uint64_t deadline = cut ? hard_deadline_ns : h.deadline_ns;
  if (now >= deadline) {
    timeout_message(err, err_len, now - h.gate_ns, deadline - h.gate_ns, cut);
    return -1;  // the caller reports it and calls hooks_finish(-1)
  }
  if (!h.have_timer) sys::log(2, "checkpoint: waiting for the program's critical sections to end");
  arm(deadline);
  return 0;
}

void hooks_poke_seen() { h.poke_seen = __atomic_load_n(&h.poke, __ATOMIC_SEQ_CST); }

bool hooks_poked() { return (h.sh || internal_used()) && __atomic_load_n(&h.poke, __ATOMIC_SEQ_CST) != h.poke_seen; }

void hooks_finish(int outcome) {
  revive_hooks_shared* const sh = h.sh;
  if ((!sh && !internal_used()) || h.stage == kIdle) return;
  disarm();
  h.stage = kIdle;
  if (internal_used()) open_gate(&g_internal);
  if (!sh) return;
  open_gate(sh);
  if (load(&sh->thread)) wake_thread(outcome == 1 ? &sh->restart_req : &sh->cont_req);
}

REVIVE_FORK_PATH void hooks_forked_child() {
  // The hooks library's atfork handler reset its block (no thread, gate open); our timer is the parent's.
  sys::set_if(h.have_timer, false);
  sys::set_if(h.stage, kIdle);
  sys::set_if(h.poke, 0);
  sys::set_if(h.poke_seen, 0);
  // Only the forking thread goes on in the child, and it was in no section of ours.
  sys::set_if(g_internal.inside, 0);
  sys::set_if(g_internal.gate, 0);
  sys::set_if(g_internal.want_wake, 0);
}

void hooks_prefault() {
  sys::touch_pages(&h, sizeof h);
  sys::touch_pages(&g_internal, sizeof g_internal);
}

}  // namespace revive::inject

// The injected library's one exported symbol besides the libc wrappers: librevive_hooks.so finds the
// engine through it (dlsym(RTLD_DEFAULT, REVIVE_HOOKS_ENTRY)). Versioned by name.
extern "C" __attribute__((visibility("default"))) const revive_hooks_engine* revive_hooks_engine_v1() {
  return &revive::inject::kEngine;
}
