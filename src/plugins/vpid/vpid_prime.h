// Every wrapper's libc slot is listed in section revive_vpid_prime, so vpid::init() resolves them all at
// library load: the plugins' save and restore code calls open, fstatat, fcntl... (which bind to these
// wrappers) with user threads suspended, where a first dlsym could wait on a lock a suspended thread holds.
#pragma once

namespace revive::vpid {

struct PrimeSlot {
  void* slot;  // address of the function pointer
  const char* name;
};

}  // namespace revive::vpid

#define VPID_PRIME(slot, name)                                                                   \
  __attribute__((used, section("revive_vpid_prime"))) const revive::vpid::PrimeSlot prime_##slot = { \
      reinterpret_cast<void*>(&slot), name};

// The primed libc slot g_NAME of a wrapper NAME(PARAMS) returning RET.
#define VPID_SLOT(ret, name, params) \
  namespace {                        \
  using name##_fn = ret (*) params;  \
  name##_fn g_##name;                \
  VPID_PRIME(g_##name, #name)        \
  }

// An exported wrapper NAME(PARAMS) whose libc slot is primed: runs BEFORE (statements), then returns libc's
// NAME(ARGS), or FAIL with errno ENOSYS when libc lacks it. Needs next_symbol.h and REVIVE_EXPORT.
#define VPID_WRAPPER(ret, fail, name, params, args, before)    \
  VPID_SLOT(ret, name, params)                                 \
  REVIVE_EXPORT ret name params {                              \
    name##_fn f = revive::plugins::next_or_enosys(&g_##name, #name); \
    if (!f) return fail;                                       \
    before;                                                    \
    return f args;                                             \
  }

// As VPID_WRAPPER, and AFTER (statements) runs once libc's call returned `r` (errno is AFTER's to keep).
#define VPID_WRAPPER_AFTER(ret, fail, name, params, args, before, after) \
  VPID_SLOT(ret, name, params)                                 \
  REVIVE_EXPORT ret name params {                              \
    name##_fn f = revive::plugins::next_or_enosys(&g_##name, #name); \
    if (!f) return fail;                                       \
    before;                                                    \
    ret r = f args;                                            \
    after;                                                     \
    return r;                                                  \
  }
