// The entry of every program signal handler the signal plugin wraps: two instructions, written in
// assembly because their order and their addresses are the point.
//
// A program handler that takes a siginfo reads the sender's pid in it, which the kernel wrote as a kernel
// pid; revive_sig_body translates it to the program's (virtual pids) with the ids of the incarnation the
// kernel wrote it in (vpid.h: to_virt_since). So the entry must learn that incarnation's epoch before
// anything else can happen. The danger is the checkpoint signal delivered together with the program's:
// the kernel sets up the program's frame, then the engine's on top of it, whose handler then finds the
// thread at this entry's first instruction. If that checkpoint is later restarted, the restored thread
// would read the *new* epoch and translate an old kernel pid with the new table (docs/process-trees.md,
// "Ids in hand across a checkpoint"). So the engine calls signal_entry_cut_fixup first thing in its
// handler, before it saves the context: a thread still at the first instruction is moved past it, with
// the epoch read then (the delivering incarnation's) in %ecx, as if it had run it. Any later cut finds
// the epoch already in a register, saved and restored with the thread.
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#include "inject/plugin.h"
#include "plugins/signal/signal_wrappers.h"

extern "C" {
extern uint32_t revive_vpid_epoch;  // vpid_state.cpp
extern char revive_sig_entry_captured[] __attribute__((visibility("hidden")));
}

// x86-64 SysV: the kernel enters with %edi = signal, %rsi = siginfo, %rdx = ucontext and the stack as
// after a call; %ecx carries the epoch to revive_sig_body as its fourth argument, by a tail jump.
asm(R"(
    .text
    .p2align 4
    .globl revive_sig_entry
    .hidden revive_sig_entry
    .type revive_sig_entry, @function
revive_sig_entry:
    .cfi_startproc
    movl revive_vpid_epoch(%rip), %ecx
    .globl revive_sig_entry_captured
    .hidden revive_sig_entry_captured
revive_sig_entry_captured:
    jmp revive_sig_body
    .cfi_endproc
    .size revive_sig_entry, .-revive_sig_entry
)");

namespace revive::plugins {

void signal_entry_cut_fixup(void* uctx) {
  auto* uc = static_cast<ucontext_t*>(uctx);
  if (!uc || uc->uc_mcontext.gregs[REG_RIP] != reinterpret_cast<greg_t>(&revive_sig_entry)) return;
  // movl zero-extends into %rcx.
  uc->uc_mcontext.gregs[REG_RCX] = greg_t(__atomic_load_n(&revive_vpid_epoch, __ATOMIC_ACQUIRE));
  uc->uc_mcontext.gregs[REG_RIP] = reinterpret_cast<greg_t>(revive_sig_entry_captured);
}

}  // namespace revive::plugins
