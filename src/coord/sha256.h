// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), used to answer the coordinator's CHALLENGE.
//
// Written here rather than taken from OpenSSL/libcrypto because this code is linked into
// librevive_inject.so, which runs inside arbitrary programs: it may depend on nothing but libc (a second
// libcrypto in a program that already links its own version is a classic symbol clash), must not
// allocate, and must be callable without libc locks. A 100-line implementation checked against the
// FIPS and RFC 4231 vectors (tests/coord/sha256_test.cpp) is the smaller risk.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::coord {

constexpr size_t kSha256Size = 32;

struct Sha256 {
  uint32_t h[8];
  uint64_t total;  // bytes hashed so far
  uint8_t block[64];
  size_t used;     // bytes in block
};

void sha256_init(Sha256* s);
void sha256_update(Sha256* s, const void* data, size_t len);
void sha256_final(Sha256* s, uint8_t out[kSha256Size]);
void sha256(const void* data, size_t len, uint8_t out[kSha256Size]);

void hmac_sha256(const void* key, size_t key_len, const void* msg, size_t msg_len,
                 uint8_t out[kSha256Size]);

// Compares in time independent of where the first difference is (proof checking).
bool equal_constant_time(const void* a, const void* b, size_t len);

}  // namespace revive::coord
