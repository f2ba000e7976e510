// The proctree plugin: every descendant of a checkpointed process stays in the computation (fork, vfork,
// exec*, posix_spawn wrappers), and the section that lets `revive restart` rebuild the tree. See
// docs/process-trees.md.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace revive::proctree {

// Forks and spawns in progress in this process (a wrapper between fork() and the child's coordinator
// HELLO), and fork children that join lazily (pending.cpp). Each has a slot. An eager fork's (and a
// spawn's) holds the parent's end of a socketpair on which the child writes one byte once it is in: '1'
// if it is part of any checkpoint in progress (it joined before or during its suspend phase), '0' if not
// (or not connected). A lazy child writes the same byte into its word of a page its parent maps shared.
// A checkpoint that finds a fork whose child is not in refuses (-EAGAIN; the coordinator takes it again):
// the parent's image would name a child the generation lacks.
constexpr int kMaxInFlight = 64;
// Counts a fork in flight and records its sync socket; returns the slot (-1: none free, still counted).
int inflight_begin(int sync_fd);
// The same for a lazy fork (no socket: the child answers in the shared page, mapped here the first
// time). Call between users_enter and users_leave.
int inflight_begin_lazy();
void inflight_end(int slot);
// fork() returned without waiting: the slot now belongs to child `pid`, which joins lazily.
void inflight_pending(int slot, pid_t pid);
// After inflight_pending, with every signal blocked: arms the join timer if idle (kJoinAfterMs).
void arm_join_timer();
// The join timer fired (the engine's handler, serving flag held): pokes each child pending that long.
void join_timer_due();
// Deletes the join timer (the next lazy fork makes another): no image may hold it. In the suspend phase
// (children_join_now) and in a standalone checkpoint's save (a process whose coordinator is gone).
void drop_join_timer();
// A thread of ours uses the lazy children's page outside the checkpoint (a checkpoint leaves it mapped).
void users_enter();
void users_leave();
// In a fork child: the parent's slots are not ours. `lazy_slot` >= 0: this child joins lazily and
// answers in that word of the parent's page (report_joined); otherwise the inherited page is let go.
void inflight_reset_in_child(int lazy_slot);
// In a lazy fork child, at its join (the engine, serving flag held): writes `c` into its word, wakes
// the parent, unmaps the parent's page. c = 0: only let go of the page. Signal-safe.
void report_joined(char c);
// Every fork in flight has a child that is part of the checkpoint in progress (peeks, never consumes).
bool inflight_all_joined();
// Some lazily joining child has not answered yet.
bool pending_children();
// Half the slots or more are pending: time for a settle that also looks for children that ended.
bool pending_slots_scarce();
// Reads the pending children's words, freeing the slots of those that answered; with `reap` also of
// those that ended (waitid WNOWAIT: zombie or reaped; one call per silent child); with `poke`, sends
// each one still silent the checkpoint signal (it joins in its handler) and waits up to timeout_ms for
// all. True if none is left silent and none answered '0'. Signal-safe.
bool settle_pending(int timeout_ms, bool poke, bool reap);
// The suspend phase's settle (called by the engine with our threads parked), and its answer for drain.
void children_join_now();
bool children_joined_at_suspend();
// Before this process leaves (exit, _exit, exec): its unjoined children join first (bounded wait).
void join_children_before_leaving();
// At the first lazy fork: the exit() handler that calls join_children_before_leaving.
void register_exit_join();
// At init: resolves the real _exit/_Exit.
void pending_init();
// The byte a new child sends its parent (fork child, spawned image).
char joined_byte();

// At init: our library's path and the REVIVE_* environment, put back into every exec'ed environment.
void capture_env();
// envp with LD_PRELOAD (our library first) and the REVIVE_* variables put back. `prev_fd` >= 0 also
// passes REVIVE_PREV_COORD_FD (exec in the same process), `sync_fd` >= 0 REVIVE_SPAWN_SYNC_FD
// (posix_spawn). Allocates (exec paths only, never on the checkpoint path); nullptr when out of memory.
char** fixed_env(char* const* envp, int prev_fd, int sync_fd);
// At init of an exec'ed or spawned image: connect at once, then close the predecessor's coordinator
// socket / tell the spawning parent (a byte on the sync fd) that we are in.
void adopt_exec_predecessor();
// Whether the program an exec names can load our library (dynamically linked, our ELF class and
// machine; scripts: their interpreter). False for static and 32-bit programs: they are outside the
// computation (exec_static.cpp). `search`: PATH lookup as execvp. `resolved` gets the path looked at.
bool program_loads_library(const char* file, bool search, char* resolved, size_t cap);

}  // namespace revive::proctree
