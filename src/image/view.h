// Allocation-free validation of an image held in memory (mmap'ed file). Used by the static restart
// program (before it owns the address space it may not allocate freely) and by the C++ reader.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "image/format.h"

namespace revive::image {

struct View {
  const uint8_t* base = nullptr;
  uint64_t size = 0;
  const FileHeader* hdr = nullptr;
  const SectionEntry* dir = nullptr;
  uint32_t dir_count = 0;
  // Engine tables (set by open_view when present and valid).
  const ProcessInfo* process = nullptr;
  const ThreadRecord* threads = nullptr;
  uint32_t thread_count = 0;
  const RegionRecord* regions = nullptr;
  uint32_t region_count = 0;
  const ChunkRecord* chunks = nullptr;
  uint32_t chunk_count = 0;
  const ShmRecord* shm = nullptr;  // section "shm" (format 2; absent: no shared memory objects)
  uint32_t shm_count = 0;
};

// The shm record of region i, or nullptr (records are in region order).
const ShmRecord* shm_of(const View& v, uint32_t region);

// Checks magic, version, architecture, page size, trailer, directory and every section checksum, and
// the consistency of the engine tables (region/chunk bounds). `name` is used in messages. On failure
// returns false with a message naming the file and the reason in err.
bool open_view(const char* name, const uint8_t* base, uint64_t size, View* v, char* err, size_t err_len);

// Verifies the checksum of one data chunk (index i). False with a message on mismatch/out of range.
bool verify_chunk(const char* name, const View& v, uint32_t i, char* err, size_t err_len);

const SectionEntry* find_section(const View& v, uint32_t kind, const char* sec_name);

}  // namespace revive::image
