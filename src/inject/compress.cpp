// Optional zstd compression of image chunks (REVIVE_COMPRESS=1). libzstd is linked in statically with
// its symbols hidden where its archive exists (else dlopen'ed at load time: the engine links libc only
// at run time), and every context lives in an arena of our own scratch, so compressing while
// user threads are suspended never reaches malloc. We never use ZSTD_c_nbWorkers: it starts threads
// through pthread_create, which takes glibc locks a suspended thread may hold. Parallelism comes from
// the engine's own workers instead (zworkers.cpp), one context each, one chunk (= one frame) per job.
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
  ZSTD_CCtx* cctx;  // the checkpoint thread's own (inline path), in g.zarena
};
Zstd z;

// Bump allocator at the start of an arena; the context lives as long as the arena.
struct Arena {
  uint8_t* base;
  size_t len, used;
};

void* arena_alloc(void* opaque, size_t n) {
  auto* a = static_cast<Arena*>(opaque);
  n = (n + 63) / 64 * 64;
  if (a->used + n > a->len) return nullptr;
  void* p = a->base + a->used;
  a->used += n;
  return p;
}
void arena_free(void*, void*) {}

}  // namespace

bool compress_load() {
  if (z.create) return true;
#if REVIVE_ZSTD_STATIC
  // Linked in (src/inject/CMakeLists.txt): nothing to load, no mappings of another library.
  z.create = ZSTD_createCCtx_advanced;
  z.set = ZSTD_CCtx_setParameter;
  z.compress2 = ZSTD_compress2;
  z.bound = ZSTD_compressBound;
  z.is_error = ZSTD_isError;
  return true;
#endif
  void* h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  z.create = reinterpret_cast<decltype(z.create)>(dlsym(h, "ZSTD_createCCtx_advanced"));
  z.set = reinterpret_cast<decltype(z.set)>(dlsym(h, "ZSTD_CCtx_setParameter"));
  z.compress2 = reinterpret_cast<decltype(z.compress2)>(dlsym(h, "ZSTD_compress2"));
  z.bound = reinterpret_cast<decltype(z.bound)>(dlsym(h, "ZSTD_compressBound"));
  z.is_error = reinterpret_cast<decltype(z.is_error)>(dlsym(h, "ZSTD_isError"));
  return z.create && z.set && z.compress2 && z.bound && z.is_error;
}

void* compress_ctx_new(void* arena, size_t len) {
  if (!z.create || len < sizeof(Arena) + 64) return nullptr;
  auto* a = static_cast<Arena*>(arena);
  a->base = static_cast<uint8_t*>(arena) + 64;
  a->len = len - 64;
  a->used = 0;
  ZSTD_CCtx* c = z.create(ZSTD_customMem{arena_alloc, arena_free, a});
  if (c) z.set(c, ZSTD_c_compressionLevel, 1);  // speed: the disk is the other limit
  return c;
}

// Makes the inline context afresh in the scratch arena g.zarena, once per image: after a restart the
// old arena was not part of the image, and a new one may even sit at the same address (so comparing
// addresses cannot tell). A context costs nothing until its first frame.
bool compress_ready() {
  if (!z.create) return false;
  z.cctx = static_cast<ZSTD_CCtx*>(compress_ctx_new(g.zarena, g.zarena_len));
  return z.cctx != nullptr;
}

size_t compress_bound(size_t n) { return z.bound ? z.bound(n) : 0; }

long compress_with(void* ctx, const void* src, size_t n, void* dst, size_t cap) {
  size_t r = z.compress2(static_cast<ZSTD_CCtx*>(ctx), dst, cap, src, n);
  return z.is_error(r) ? -1 : long(r);
}

long compress_chunk(const void* src, size_t n, void* dst, size_t cap) { return compress_with(z.cctx, src, n, dst, cap); }

}  // namespace revive::inject
