// See engine_section.h. The protocol is the hooks ABI's (src/hooks/hooks_abi.h: inside, gate, want_wake).
#include "plugins/common/engine_section.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hooks/hooks_abi.h"
#include "inject/plugin.h"

// Weak: a plugin linked without the engine (the plugin tests and benches) has no checkpoint to keep out.
namespace revive::inject {
::revive_hooks_shared* internal_sections() __attribute__((weak));
void internal_sections_notify() __attribute__((weak));
}  // namespace revive::inject

namespace revive::plugins {

EngineSection::EngineSection() {
  if (!inject::internal_sections) return;
  revive_hooks_shared* b = inject::internal_sections();
  for (;;) {
    __atomic_add_fetch(&b->inside, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&b->gate, __ATOMIC_SEQ_CST)) return;
    // A checkpoint is coming: step back out and wait for it to be over.
    if (__atomic_sub_fetch(&b->inside, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&b->want_wake, __ATOMIC_SEQ_CST))
      inject::internal_sections_notify();
    while (__atomic_load_n(&b->gate, __ATOMIC_SEQ_CST)) {
      struct timespec ts = {0, 50 * 1000 * 1000};
      syscall(SYS_futex, &b->gate, 0 /*FUTEX_WAIT*/, 1, &ts, nullptr, 0);
    }
  }
}

EngineSection::~EngineSection() {
  if (!inject::internal_sections) return;
  revive_hooks_shared* b = inject::internal_sections();
  if (__atomic_sub_fetch(&b->inside, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&b->want_wake, __ATOMIC_SEQ_CST))
    inject::internal_sections_notify();
}

}  // namespace revive::plugins
