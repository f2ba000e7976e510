// Raw system calls and tiny string helpers for code that runs while user threads are suspended, inside
// the checkpoint signal handler, or in a restored thread before its libc state is fixed up. No errno
// (results are -errno), no locks, no allocation.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

namespace revive::inject::sys {

inline long call6(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

template <class... A>
inline long sc(long n, A... a) {
  return call6(n, (long)a...);
}

// Stores v unless x holds it already. In a fork child every page written is a copy-on-write fault
// (~1 us each, docs/performance.md "Virtual pids"); resets that are usually no-ops read instead.
template <class T, class V>
inline void set_if(T& x, V v) {
  if (x != T(v)) x = T(v);
}

// Reads every page of [p, p + n). A page of .bss the process never touched has no mapping, so a fork
// child that only reads it (set_if above: is there anything to reset?) takes a page fault, and takes it
// again at every fork. Read once in the parent, it maps the zero page, and fork copies that mapping.
inline void touch_pages(const void* p, size_t n) {
  const auto* c = static_cast<const volatile char*>(p);
  for (size_t off = 0; off < n; off += 4096) (void)c[off];
  if (n) (void)c[n - 1];
}

inline int gettid() { return (int)sc(SYS_gettid); }
inline int getpid() { return (int)sc(SYS_getpid); }

// Futex on a 32-bit word, private to the process.
inline long futex_wait(volatile uint32_t* w, uint32_t val, long timeout_ns) {
  struct {
    long s, ns;
  } ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
  return sc(SYS_futex, w, 128 /*FUTEX_WAIT_PRIVATE*/, val, timeout_ns < 0 ? nullptr : &ts, 0, 0);
}
inline void futex_wake(volatile uint32_t* w) { sc(SYS_futex, w, 129 /*FUTEX_WAKE_PRIVATE*/, 0x7fffffff, 0, 0, 0); }

inline size_t slen(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}
// Appends s to buf (cap includes the nul); always nul-terminates.
inline void append(char* buf, size_t cap, const char* s) {
  size_t n = slen(buf);
  while (*s && n + 1 < cap) buf[n++] = *s++;
  buf[n] = 0;
}
inline void append_u64(char* buf, size_t cap, uint64_t v) {
  char t[24];
  int i = 23;
  t[i] = 0;
  do t[--i] = char('0' + v % 10); while ((v /= 10) && i > 0);
  append(buf, cap, t + i);
}
inline bool starts_with(const char* s, const char* p) {
  while (*p)
    if (*s++ != *p++) return false;
  return true;
}
inline bool ends_with(const char* s, const char* suf) {
  size_t a = slen(s), b = slen(suf);
  if (b > a) return false;
  for (size_t i = 0; i < b; ++i)
    if (s[a - b + i] != suf[i]) return false;
  return true;
}
inline void copy(void* d, const void* s, size_t n) {
  auto* dp = static_cast<volatile char*>(d);
  auto* sp = static_cast<const char*>(s);
  for (size_t i = 0; i < n; ++i) dp[i] = sp[i];
}
inline void zero(void* d, size_t n) {
  auto* dp = static_cast<volatile char*>(d);
  for (size_t i = 0; i < n; ++i) dp[i] = 0;
}
inline uint64_t parse_hex(const char*& p) {
  uint64_t v = 0;
  for (;; ++p) {
    char c = *p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + uint64_t(d);
  }
}
inline uint64_t parse_dec(const char*& p) {
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + uint64_t(*p++ - '0');
  return v;
}

// Writes a whole buffer (retrying short writes); 0 or -errno.
inline long write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    long r = sc(SYS_write, fd, c, n);
    if (r == -4 /*EINTR*/) continue;
    if (r < 0) return r;
    if (r == 0) return -5;
    c += r;
    n -= size_t(r);
  }
  return 0;
}

// Log line to stderr when REVIVE_LOG >= level (no stdio).
void log(int level, const char* a, const char* b = "", const char* c = "", const char* d = "");

}  // namespace revive::inject::sys

namespace revive::inject {
// Lines for the program's stderr (stderr_defer.cpp): held from the suspend to the resume of a checkpoint,
// so that every process saves a shared stderr file at one size; written at once otherwise.
void stderr_line(const char* s, size_t n);
void stderr_hold();
void stderr_release();
void stderr_forget();  // in a forked writer child
}  // namespace revive::inject
