// Plugin interface of the injected library: one plugin per kind of process state (CRIU's one module per
// kernel object, DMTCP's event hooks). See docs/contracts.md for the rules each event runs under.
#pragma once

#include <stddef.h>
#include <stdint.h>

struct revive_hooks_shared;  // src/hooks/hooks_abi.h

namespace revive::inject {

// Append-only sink for a plugin's image section. Backed by mmap'ed memory, so usable while user threads
// are suspended (no malloc). write() returns false only when memory cannot be mapped.
class SectionWriter {
 public:
  virtual bool write(const void* data, size_t len) = 0;

 protected:
  ~SectionWriter() = default;
};

// Reader over a plugin's image section, as saved. read() returns false, reading nothing, when fewer than
// len bytes remain (a truncated or foreign section): the plugin must then fail with a message.
class SectionReader {
 public:
  virtual bool read(void* data, size_t len) = 0;
  virtual size_t remaining() const = 0;

 protected:
  ~SectionReader() = default;
};

struct Plugin {
  const char* name;  // unique, [a-z0-9_]+; also the image section name
  uint32_t version;  // schema version of the section; restore refuses any other
  // Library load, single-threaded, before main. May allocate and dlsym. 0 or -errno.
  int (*init)();
  // Checkpoint thread, user threads suspended: no malloc, stdio, locks. 0 or -errno.
  int (*save)(SectionWriter& out);
  // Original process, after the image is durable (ok) or the checkpoint failed (!ok), before user threads run.
  void (*resume)(bool ok);
  // Restored process, memory back, user threads held. Same restrictions as save. 0 or -errno; on error writes
  // a nul-terminated message naming the object (fd number, path, signal...) and the reason into msg.
  int (*restore)(SectionReader& in, char* msg, size_t msg_len);
  // Optional phase events (nullptr: nothing to do), on the checkpoint thread with user threads held, same
  // restrictions as save; each runs when the coordinator's PHASE of the same name arrives, in every process
  // of the computation at once (a plugin may wait for its peers). 0 or -errno with a message in msg.
  // drain: original process, after every process is suspended, before write. reconnect, refill: restored
  // process, after every process of the manifest is back. A plugin that drained refills in its resume().
  int (*drain)(uint64_t generation, char* msg, size_t msg_len);
  int (*reconnect)(uint64_t generation, char* msg, size_t msg_len);
  int (*refill)(uint64_t generation, char* msg, size_t msg_len);
  // Optional: restored process, when the coordinator's resume arrives (every process of the computation
  // has refilled), just before user threads run again; same restrictions as save. The place for work
  // that needs every peer ready (the verbs plugin re-posts the sends that were in flight).
  void (*restored)(uint64_t generation);
  // Oldest section version restore still reads (0: only `version`); such a plugin tells the versions
  // apart from the section itself. Lets a plugin extend its section without orphaning older images.
  uint32_t oldest_version = 0;
};

// The coordinator's key/value table (PUBLISH/LOOKUP), for plugins during the phase events above.
// coord_publish: false without a coordinator. coord_lookup: 1 found (value copied, nul-terminated),
// 0 not found (wait: not published within timeout_ms), -1 no coordinator or it was lost.
bool coord_publish(const char* key, const char* value);
int coord_lookup(const char* key, bool wait, int timeout_ms, char* value, size_t cap);
// The least published key greater than `after` that starts with `prefix` (pass after = prefix to start):
// 1 found (key and value copied, nul-terminated), 0 none, -1 no coordinator, lost, or the key does not
// fit key_cap. Never waits for a publish; walks what the coordinator holds now.
int coord_next(const char* prefix, const char* after, int timeout_ms, char* key, size_t key_cap, char* value,
               size_t value_cap);
// How many published keys start with `prefix` (>= 0), or -1 without a coordinator.
long coord_count(const char* prefix, int timeout_ms);
// Whether this process works with a coordinator (configured; the connection may not be up yet, e.g.
// during a restored process's restore). Channels between processes are rebuilt only then.
bool coord_configured();
// The engine's socket to the coordinator (-1 when none): its local address is this host as peers reach it.
int coord_socket();
// This process's id in the computation (upid; 0 without a coordinator). The coordinator publishes
// "gone.<upid>" once a process has left the computation (killed, crashed or exited).
uint64_t coord_upid();

// Critical sections of plugins (the verbs plugin's wrappers): a block in the hooks ABI's layout
// (src/hooks/hooks_abi.h: `inside`, `gate`, `want_wake`) that the engine gates like the program's own
// sections: a checkpoint request closes the gate, waits until `inside` is 0 and opens it when the
// checkpoint is over (in the restored process too). Enter: add 1 to inside; if gate is set, take it back
// (notify if that made it 0 while want_wake is set) and futex-wait for gate 0, then retry. Leave: take 1
// from inside; if it is 0 and want_wake is set, call internal_sections_notify(). Never block inside one.
::revive_hooks_shared* internal_sections();
void internal_sections_notify();

// Moves the engine's own descriptor at `fd` (plugins.h fd_reserved: e.g. the coordinator socket a restored
// process opened) to another number, so a plugin can put the program's descriptor back there. true when
// fd is not (or no longer) the engine's.
bool fd_move_reserved(int fd);

// A plugin's save that fails says why here (the text replaces the generic "save failed" in the error the
// coordinator reports to `revive checkpoint`); copied, no allocation. Weak default in the plugins.
void plugin_refusal(const char* text);

// In a restored process, from its restore until the coordinator's resume: the value of a REVIVE_* variable
// in the environment of the restart (revive-restart's), or nullptr. The program's own environment is the
// one it was checkpointed with; this is how a restart tells plugins how to come back (REVIVE_IB2TCP).
const char* restart_env(const char* key);

// The checkpoint directory (absolute; "" when unknown). Plugins keep their own data out of it.
const char* checkpoint_dir();
// The name this process's host goes by in the computation: REVIVE_HOST_ID (set by --hosts; after a restart,
// the restarter's), "" when not set (then the node name, as the coordinator's HELLO does). Weak default "".
const char* host_name();
// During a plugin's save: the generation directory this checkpoint's image goes to (absolute, e.g.
// DIR/ckpt-3; "" outside a save). The files plugin puts the blocks of large files next to the image.
const char* generation_dir();
// During a restored process's restore: the absolute path of the image it was restored from ("" if
// unknown). The files plugin reads the blocks of large files from the image's directory.
const char* restored_image();

// The checkpoint signal owned by the engine (default SIGRTMAX-2, REVIVE_SIGNAL overrides).
int checkpoint_signal();
// sigev_value of the proctree plugin's join timer (a raw POSIX timer sending the checkpoint signal): the
// handler takes its SI_TIMER for a wake-up that pokes late fork children, never for a checkpoint trigger.
constexpr int kJoinTimerTag = 0x4a4f494e;

// How many times the engine's signals have interrupted the calling thread (wraps around). The signal
// plugin compares it around sleeps and waits that failed with EINTR. The signal plugin has a weak default
// returning 0, for its tests without the engine.
uint32_t checkpoint_interruptions();
// The program's own signal handlers: the signal plugin's trampoline calls enter (with the ucontext the
// kernel gave the handler) before and leave after each, so the engine knows how deep the calling thread is
// in them and which of them interrupted a `syscall` instruction. A restartable call made at handler
// depth `depth` (program_handler_depth() when it began) that the engine's last signal cut, directly or
// inside a handler that interrupted it, is made again in a restored process when this returns true: the
// thread was found at the call's `syscall` instruction (the kernel had turned a blocked call back onto
// it, SA_RESTART, or it was about to be made), or in a handler entered over it. Weak defaults in the
// signal plugin, as above.
uint32_t program_handler_depth();
void program_handler_enter(const void* uctx);
void program_handler_leave();
bool checkpoint_cut_restarts_call(uint32_t depth);

// A function the engine calls first thing in its signal handler, with the interrupted thread's ucontext,
// before it looks at or saves that context: a plugin may move a thread past instructions that must not be
// split from their delivery (the signal plugin's handler entry, signal_entry.cpp). Runs in signal context
// on every engine signal (checkpoints and wake-ups): async-signal-safe, no locks, no allocation. Set once,
// from a plugin's init(). Weak no-op default in the signal plugin, for its tests without the engine.
void set_cut_fixup(void (*fixup)(void* uctx));

// All plugins, in the order their events run (restore runs in the same order). Defined in plugin_list.cpp.
extern const Plugin* const kPlugins[];
extern const size_t kPluginCount;

}  // namespace revive::inject
