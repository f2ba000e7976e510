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
