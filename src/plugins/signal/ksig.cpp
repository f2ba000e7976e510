#include "plugins/signal/ksig.h"

#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject/plugin.h"

namespace revive::inject {
// For the plugins' tests without the engine; the engine's definition (quiesce.cpp) replaces it.
__attribute__((weak)) uint32_t checkpoint_interruptions() { return 0; }
__attribute__((weak)) void set_cut_fixup(void (*)(void*)) {}
__attribute__((weak)) uint32_t program_handler_depth() { return 0; }
__attribute__((weak)) void program_handler_enter(const void*) {}
__attribute__((weak)) void program_handler_leave() {}
__attribute__((weak)) bool checkpoint_cut_restarts_call(uint32_t) { return false; }
}  // namespace revive::inject

namespace revive::plugins {

int ksigaction(int sig, const KSigaction* act, KSigaction* old) {
  return static_cast<int>(syscall(SYS_rt_sigaction, sig, act, old, 8));
}

uint64_t ksigpending() {
  uint64_t set = 0;
  syscall(SYS_rt_sigpending, &set, 8);
  return set;
}

bool ktake(int sig, siginfo_t* info) {
  uint64_t set = sigbit(sig);
  struct timespec zero = {0, 0};
  return syscall(SYS_rt_sigtimedwait, &set, info, &zero, 8) == sig;
}

int kqueue_self(const siginfo_t& info) {
  siginfo_t copy = info;  // the kernel may not modify it, but the syscall takes a non-const pointer
  // The kernel lets a thread forge si_code >= 0 (kill's) only when the target pid is the caller's own id
  // (task_pid_vnr(current): the *thread* id). Our tid names our thread group, and the signal is queued
  // process-wide, as it was. getpid() would fail with EPERM on the checkpoint/restore thread.
  return static_cast<int>(syscall(SYS_rt_sigqueueinfo, syscall(SYS_gettid), info.si_signo, &copy));
}

int ckpt_sig() {
  int s = inject::checkpoint_signal();
  return s >= 1 && s <= kMaxSig ? s : 0;
}

}  // namespace revive::plugins
