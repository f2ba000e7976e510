// Application hooks, the engine's half (hooks.cpp, docs/hooks.md). Called on the serving thread, in the
// checkpoint signal's handler.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::inject {

// Before a checkpoint of this process (the coordinator's PHASE suspend, a standalone trigger). 1: take it
// now (no hooks library attached, or callbacks done and no critical section open; new sections wait until
// hooks_finish). 0: not yet (checkpoint callbacks running, or a section open): the engine is woken again
// (notify, or the timeout's timer) and calls it again. -1: a section outlived the timeout, or
// hard_deadline_ns (0: none; the coordinator's phase timeout), or the checkpoint callbacks did not return
// by hard_deadline_ns: err says so; call hooks_finish(-1).
int hooks_prepare(uint64_t hard_deadline_ns, char* err, size_t err_len);
// A notify() came since the serving loop last called hooks_poke_seen (work for it).
bool hooks_poked();
void hooks_poke_seen();
// After the checkpoint attempt that hooks_prepare began: 0 taken and the program resumed, -1 failed or
// abandoned (resumed), 1 in the restored process (threads released). Opens the gate and asks the hooks
// thread for the continue (0, -1) or restart (1) callbacks. Idempotent.
void hooks_finish(int outcome);
// Fork child: forget the parent's pending request and timer.
void hooks_forked_child();
// At library load: the pages hooks_forked_child reads, mapped in the parent (sys::touch_pages).
void hooks_prefault();

}  // namespace revive::inject
