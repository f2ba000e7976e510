// Hand-over block between revive-restart and the restored engine. The engine reserves one in its .bss
// and records its address in ProcessInfo::restart_info_addr; the restarter fills it in after memory is
// back and before any restored thread runs. Everything it points to lives in a mapping the restarter
// made and the engine unmaps once it has read it.
#pragma once

#include <stdint.h>

namespace revive::image {

constexpr uint64_t kRestartInfoMagic = 0x5256525354415254ull;  // "RVRSTART"
constexpr uint32_t kMaxUnmap = 64;

struct RestartInfo {
  uint64_t magic;          // kRestartInfoMagic once filled in
  uint64_t blob_addr;      // restarter-made mapping, engine munmaps it
  uint64_t blob_len;
  uint64_t env_off, env_len;        // "KEY=VALUE\0"... the restarter's REVIVE_* environment
  uint64_t plugins_off, plugins_len; // PluginBlob records, back to back
  uint64_t image_path_off;          // nul-terminated absolute path of the image restored from
  uint32_t lazy;                    // 1: data mapped from the image file (it must stay)
  uint32_t unmap_count;
  uint64_t unmap[kMaxUnmap][2];     // the restarter's own mappings [start, end) to drop
};

// Record in the plugins blob: header then `length` bytes, next record 8-aligned.
struct PluginBlob {
  char name[24];
  uint32_t version;
  uint32_t reserved;
  uint64_t length;
};

}  // namespace revive::image
