// Optional zstd compression of image chunks (REVIVE_COMPRESS=1). libzstd is dlopen'ed at load time (the
// engine links libc only) and its context lives in an arena of our own scratch, so compressing while
// user threads are suspended never reaches malloc. Single-threaded on purpose: ZSTD_c_nbWorkers starts
// threads through pthread_create, which takes glibc locks a suspended thread may hold.
#include <dlfcn.h>
#include <sys/mman.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "inject/engine.h"
#include "inject/sys.h"

namespace revive::inject {
namespace {

struct Zstd {
  ZSTD_CCtx* (*create)(ZSTD_customMem);
  size_t (*set)(ZSTD_CCtx*, ZSTD_cParameter, int);
  size_t (*compress2)(ZSTD_CCtx*, void*, size_t, const void*, size_t);
  size_t (*bound)(size_t);
  unsigned (*is_error)(size_t);
  ZSTD_CCtx* cctx;
  uint8_t* arena;  // bump allocator for zstd's context; scratch, excluded from images
  size_t arena_len, arena_used;
};
Zstd z;

void* arena_alloc(void*, size_t n) {
  n = (n + 63) / 64 * 64;
  if (z.arena_used + n > z.arena_len) return nullptr;
  void* p = z.arena + z.arena_used;
  z.arena_used += n;
  return p;
}
void arena_free(void*, void*) {}  // the context lives as long as the arena

}  // namespace

bool compress_load() {
  if (z.create) return true;
  void* h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  z.create = reinterpret_cast<decltype(z.create)>(dlsym(h, "ZSTD_createCCtx_advanced"));
  z.set = reinterpret_cast<decltype(z.set)>(dlsym(h, "ZSTD_CCtx_setParameter"));
  z.compress2 = reinterpret_cast<decltype(z.compress2)>(dlsym(h, "ZSTD_compress2"));
  z.bound = reinterpret_cast<decltype(z.bound)>(dlsym(h, "ZSTD_compressBound"));
  z.is_error = reinterpret_cast<decltype(z.is_error)>(dlsym(h, "ZSTD_isError"));
  return z.create && z.set && z.compress2 && z.bound && z.is_error;
}

// (Re)creates the context in the scratch arena g.zarena (alloc_scratch() made it).
bool compress_ready() {
  if (!z.create) return false;
  if (z.arena != g.zarena) {
    z.arena = g.zarena;
    z.arena_len = g.zarena_len;
    z.arena_used = 0;
    z.cctx = z.create(ZSTD_customMem{arena_alloc, arena_free, nullptr});
    if (z.cctx) z.set(z.cctx, ZSTD_c_compressionLevel, 1);  // speed: the disk is the other limit
  }
  return z.cctx != nullptr;
}

size_t compress_bound(size_t n) { return z.bound ? z.bound(n) : 0; }

long compress_chunk(const void* src, size_t n, void* dst, size_t cap) {
  size_t r = z.compress2(z.cctx, dst, cap, src, n);
  return z.is_error(r) ? -1 : long(r);
}

}  // namespace revive::inject
