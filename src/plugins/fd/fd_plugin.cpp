// fd plugin: every open descriptor (see fd_save.cpp, fd_restore.cpp and docs/plugins.md).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/common/msg.h"
#include "plugins/common/outside_files.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/fd/fd_record.h"
#include "plugins/plugins.h"

namespace revive::plugins {

int64_t g_max_deleted_bytes = kDefaultMaxDeletedBytes;
bool g_fd_stand_ins = false;

// init runs before main, single-threaded: getenv is fine here (and only here).
int fd_init() {
  if (!outside_files_init()) {
    warn("REVIVE_OUTSIDE_FILES is not a list of <dev>:<ino> (at most 16); checkpointing disabled");
    return -EINVAL;
  }
  const char* v = getenv("REVIVE_FD_DELETED_MAX_MB");
  if (v && *v) {
    char* end = nullptr;
    long long mb = strtoll(v, &end, 10);
    if (*end || mb < 0 || mb > (1LL << 20)) {  // a typo must not pass silently
      warn("REVIVE_FD_DELETED_MAX_MB is not a size in MiB (0..1048576); checkpointing disabled");
      return -EINVAL;
    }
    g_max_deleted_bytes = mb << 20;
  }
  const char* u = getenv("REVIVE_FD_UNSUPPORTED");
  if (u && *u) {
    if (strcmp(u, "stand-in") != 0 && strcmp(u, "refuse") != 0) {
      warn("REVIVE_FD_UNSUPPORTED is neither 'refuse' nor 'stand-in'; checkpointing disabled");
      return -EINVAL;
    }
    g_fd_stand_ins = strcmp(u, "stand-in") == 0;
  }
  return 0;
}

}  // namespace revive::plugins

namespace revive::inject {

// Weak default so the plugins link without the engine; the engine's definition replaces it.
__attribute__((weak)) bool fd_reserved(int) { return false; }
__attribute__((weak)) void plugin_refusal(const char*) {}
__attribute__((weak)) bool coord_configured() { return false; }
__attribute__((weak)) bool coord_publish(const char*, const char*) { return false; }
__attribute__((weak)) int coord_next(const char*, const char*, int, char*, size_t, char*, size_t) { return -1; }
__attribute__((weak)) int coord_lookup(const char*, bool, int, char*, size_t) { return -1; }  // fd_inotify.cpp

const Plugin kFdPlugin = {
    "fd", plugins::kFdVersion, plugins::fd_init, plugins::fd_save, [](bool) {}, plugins::fd_restore, plugins::fd_drain, nullptr, nullptr, nullptr,
    // Version 6 added a kind (inotify), 7 the lock list after the records, 8 share keys on eventfds, 9 on
    // timerfds: a version 5 section reads the same.
    5};

}  // namespace revive::inject
