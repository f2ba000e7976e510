/* <revive/hooks.h> — application hooks for transparent checkpoint/restart (`revive launch`), after
 * LAM/MPI's callbacks and critical sections. Link with -lrevive_hooks. docs/hooks.md is the reference.
 *
 * A program links and runs the same with or without revive: without it (no `revive launch`, or the engine
 * not loaded) every function succeeds and nothing is ever called back; revive_hooks_active() says which.
 *
 * Callbacks run on a thread of the hooks library, never in a signal handler: they may allocate, lock,
 * print and call MPI. Checkpoint callbacks all return before any memory is saved (the image holds what they
 * did); then the checkpoint waits until no critical section is open; after it, continue callbacks run in
 * the process that was checkpointed and restart callbacks in a restored one, while the program's own
 * threads run again. Each kind runs in registration order, one at a time. */
#ifndef REVIVE_HOOKS_H_
#define REVIVE_HOOKS_H_

#ifdef __cplusplus
extern "C" {
#endif

#define REVIVE_HOOKS_VERSION 1

enum revive_hook_kind {
  REVIVE_HOOK_CHECKPOINT = 0, /* before the checkpoint: flush, close, quiesce what you own */
  REVIVE_HOOK_CONTINUE = 1,   /* after it, in the same run (also when the checkpoint failed) */
  REVIVE_HOOK_RESTART = 2     /* after it, in a run restored from it */
};

typedef void (*revive_hook_fn)(void* arg);

/* 1 when the program runs under revive with checkpointing available, else 0. */
int revive_hooks_active(void);

/* Registers fn(arg) for the event `kind`. Returns an id > 0, or -EINVAL (bad kind, NULL fn), -ENOSPC
 * (64 callbacks already), -EAGAIN (the hooks thread cannot be started). The first registration under
 * revive starts the hooks thread (one per process, all signals blocked, named "revive-hooks"). */
int revive_register_callback(int kind, revive_hook_fn fn, void* arg);
/* Removes a callback: 0, or -ENOENT. Waits while the hooks thread is running callbacks (unless called
 * from one), so the callback is not running anymore when it returns. */
int revive_unregister_callback(int id);

/* Critical section: a checkpoint is not taken while any thread of the process is inside one. Nestable per
 * thread (only the outermost begin/end count), callable from any thread; begin and end of a section on the
 * same thread. Cheap: one atomic add each (no system call) unless a checkpoint waits. A checkpoint request
 * that arrives while sections are open waits until they have all ended (new outermost begins wait for the
 * checkpoint); if that takes longer than the critical-section timeout, that checkpoint fails with a message
 * naming this process and the program goes on (the previous checkpoint stays the newest). */
void revive_critical_begin(void);
/* 0, or -EINVAL when this thread is not inside a section. */
int revive_critical_end(void);
/* Nesting depth of the calling thread (0: outside). */
int revive_critical_depth(void);

/* The timeout, in seconds (> 0): REVIVE_CRITICAL_TIMEOUT, default 30. 0 or -EINVAL. */
int revive_set_critical_timeout(double seconds);
double revive_critical_timeout(void);

#ifdef __cplusplus
}
#endif
#endif
