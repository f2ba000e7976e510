/* The contract between librevive_hooks.so (the public hooks library a program links) and the injected
 * engine (librevive_inject.so). Plain C, version 1. docs/hooks.md explains the protocol.
 *
 * The hooks library owns one zero-initialised `revive_hooks_shared` block. At load it looks up the
 * engine's one exported entry, `revive_hooks_engine_v1` (dlsym(RTLD_DEFAULT)); without revive the symbol
 * is absent and every hook does nothing. With it, it hands the block to the engine (`attach`); from then
 * on both sides read and write its words with atomic operations only, and the engine never calls into the
 * hooks library (it is in a signal handler): it bumps a request counter and wakes the hooks thread with
 * FUTEX_WAKE on `event`. The hooks library calls `notify` (async-signal-safe, no allocation, no lock) when
 * the engine should look at the block again: checkpoint callbacks done, or the last critical section
 * ended while the engine waits for it. Both sides' memory is in every image, so the block and the
 * engine's pointer to it are valid again in a restored process. */
#ifndef REVIVE_SRC_HOOKS_HOOKS_ABI_H_
#define REVIVE_SRC_HOOKS_HOOKS_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REVIVE_HOOKS_ABI 1
#define REVIVE_HOOKS_ENTRY "revive_hooks_engine_v1"

struct revive_hooks_shared {
  uint32_t abi;                  /* REVIVE_HOOKS_ABI, set by the hooks library before attach */
  volatile uint32_t inside;      /* threads inside a critical section (outermost begin .. end) */
  volatile uint32_t gate;        /* 1: a checkpoint is being taken or waits; outermost begins wait (futex) */
  volatile uint32_t want_wake;   /* 1: the engine waits for inside == 0; the end reaching 0 calls notify */
  volatile uint32_t thread;      /* 1: the hooks thread runs (callbacks are registered) */
  volatile uint32_t event;       /* futex word of the hooks thread: bumped with every request below */
  volatile uint32_t ckpt_req;    /* checkpoint callbacks asked (sequence number) ... */
  volatile uint32_t ckpt_done;   /* ... and done: equal to ckpt_req when they have all returned */
  volatile uint32_t cont_req;    /* continue callbacks asked (the same run goes on) */
  volatile uint32_t restart_req; /* restart callbacks asked (a restored run) */
  volatile uint32_t timeout_ms;  /* how long a checkpoint waits for critical sections to end (0: 30 s) */
  uint32_t reserved[5];
};

struct revive_hooks_engine {
  uint32_t abi; /* REVIVE_HOOKS_ABI */
  /* 0, or -1 when the engine cannot take the block (another ABI, already attached to another block). */
  int (*attach)(struct revive_hooks_shared* shared);
  /* Look at the block again, soon. Async-signal-safe (one rt_sigqueueinfo). */
  void (*notify)(void);
};

typedef const struct revive_hooks_engine* (*revive_hooks_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
