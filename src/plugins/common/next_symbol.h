// Lazily resolved "real" libc functions for interposing wrappers. Resolved in the plugins' init(), but a
// wrapper may run earlier (another library's constructor calling sigaction): then it resolves on first use.
// dlsym is only ever reached outside the checkpoint path, where the lock it may take is safe.
#pragma once

#include <dlfcn.h>
#include <errno.h>

namespace revive::plugins {

template <typename Fn>
Fn next_symbol(Fn* slot, const char* name) {
  Fn f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!f) {
    f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);  // racing resolvers store the same value
  }
  return f;
}

// For wrappers: the real function, or nullptr with errno = ENOSYS when libc lacks it.
template <typename Fn>
Fn next_or_enosys(Fn* slot, const char* name) {
  Fn f = next_symbol(slot, name);
  if (!f) errno = ENOSYS;
  return f;
}

}  // namespace revive::plugins
