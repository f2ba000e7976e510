// revive-restart internals. The program is static (no loader, no libc after the jump) and allocation-
// free once it starts placing memory: the heap it might grow into is an address the image may need.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "image/view.h"

namespace revive::restart {

struct Range {
  uint64_t start, end;
  char name[32];  // "[vdso]", "[stack]", ... or "" (first characters of the path)
};

constexpr size_t kMaxOwn = 256;

// Makes the allocations restore_memory() needs (zstd context) before the layout check.
void warm_up();

// Our own mappings from /proc/self/maps. Returns count or -1.
long read_own_maps(Range* out, size_t cap);

// True if a saved region or a saved special mapping overlaps one of our (non-special) mappings; `what`
// gets a description of the first collision.
bool collides(const image::View& v, const Range* own, size_t n, char* what, size_t what_len);

// Moves this kernel's [vvar] [vvar_vclock] [vdso] to the saved addresses. Refuses (false + message) when
// the sizes or the vdso bytes differ: the restored libc holds pointers into the old vdso.
bool move_specials(const image::View& v, const Range* own, size_t n, char* err, size_t err_len);

// Maps every saved region at its address with its protection and puts the saved bytes back (read, or
// with lazy: mapped privately from the image file).
bool restore_memory(const image::View& v, const char* image_name, int image_fd, bool lazy, char* err,
                    size_t err_len);

// One read of the image into restored memory (reader.cpp): LEN bytes at image offset OFF to DST.
struct Piece {
  char* dst;
  uint64_t len, off;
};
// How many reads to keep in flight (REVIVE_RESTART_READERS, default 3).
int reader_count();
// Starts READERS threads that read PIECES in order of their index (fewer if threads cannot be made,
// none for READERS 1). DIRECT_FD: the image opened with O_DIRECT, or -1. STATE: COUNT zeroed ints.
void reader_start(int fd, int direct_fd, const Piece* pieces, int* state, uint32_t count, int readers);
// Waits until piece I is in memory: 0, or the errno of its failed read.
int reader_wait(uint32_t i);
// Stops the readers (pieces not claimed yet are not read) and drops their stacks.
void reader_finish();

// Makes the kernel's idea of brk/code/data/stack/args match the restored memory (PR_SET_MM_MAP).
void restore_mm(const image::View& v);
// The struct prctl_mm_map the kernel accepted (g_mm_map_len 0: it refused), for the fd plugin to set it
// again with exe_fd once we are unmapped (handover.cpp).
constexpr uint32_t kMmMapMax = 128;
extern uint8_t g_mm_map[kMmMapMax];
extern uint32_t g_mm_map_len;

// Fills in the engine's RestartInfo and starts the saved threads; does not return on success.
bool hand_over(const image::View& v, const char* image_path, bool lazy, char* err, size_t err_len);

// The shared memory objects restore_memory() mapped from a descriptor (memfds, deleted and tmpfs files),
// each a descriptor of our own kept open for the hand-over: the fd plugin gives a deleted file the
// program held open and mapped (its record's kStoredInShm) that same object back (plugins/fd/fd_record.h).
struct MappedObject {
  uint64_t start, end;
  int fd;
};
const MappedObject* mapped_objects(uint32_t* n);

}  // namespace revive::restart
