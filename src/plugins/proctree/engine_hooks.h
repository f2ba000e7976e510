// What the proctree plugin needs from the engine (src/inject/fork_child.cpp). Weak, so the plugins still
// link (and their unit tests run) without the engine: a null address means "no engine".
#pragma once

#include <stddef.h>

namespace revive::inject {

// In the child of a fork: drop the parent's coordinator connection, connect as a new process of the
// computation (HELLO role=proc), arm this process's wake-ups. False if the coordinator could
// not be reached (the child then runs on unchecked, like a process whose coordinator is lost).
bool after_fork_child() __attribute__((weak));
// The same, lazily (fork() returns at once in parent and child): drop the parent's connection and join
// later: before the child's own fork/exec/spawn (coord_join_now), on its join timer, or when its parent
// pokes it with the checkpoint signal (30 ms after the fork, or at a checkpoint), or when `parent_pid`
// dies; the joined byte then goes to proctree::report_joined. Call with every signal blocked.
void after_fork_child_lazy(int parent_pid) __attribute__((weak));
// Whether a lazy child could ever join on its own: only an engine that serves its signal (ready: a
// disabled engine would leave the parent waiting for it at every checkpoint and exit).
bool lazy_join_possible() __attribute__((weak));
// In a lazily joining fork child: join now if not yet done (a no-op otherwise). Not in signal context.
void coord_join_now() __attribute__((weak));
// The coordinator socket (-1: none), kept open across exec so the computation never loses the process.
int coord_fd_for_exec() __attribute__((weak));
// Connect now (in an exec'ed image, before main) instead of later on the checkpoint thread.
bool coord_connect_now(bool drop_inherited) __attribute__((weak));
// Right before an exec of this process, and after one that failed: the checkpoint signal must not reach
// the new image before its engine handles it (src/inject/coord_link.cpp).
void before_exec() __attribute__((weak));
void after_failed_exec() __attribute__((weak));
// Block until this process's own first connection attempt has ended (or timeout_ms passed), so that a
// parent is always known to the coordinator before any child of it is.
void coord_wait_connected(int timeout_ms) __attribute__((weak));
// After this process's HELLO: true if it is not connected, or joined while a checkpoint it is not part
// of was being taken (WELCOME outside=1). The byte a fork child or spawned image sends its parent says it.
bool coord_joined_outside() __attribute__((weak));
// "KEY=VALUE\0..." of the coordinator keys an exec'ed image must get (the engine's current config, not
// the environment a restored process captured at its launch); the bytes written.
size_t exec_coord_env(char* buf, size_t cap) __attribute__((weak));
// The engine's forked image writer (a child of this process until reaped), or 0.
long checkpoint_writer_pid() __attribute__((weak));

}  // namespace revive::inject
