// fd plugin: every open descriptor (see fd_save.cpp, fd_restore.cpp and docs/plugins.md).
#include "plugins/fd/fd_internal.h"
#include "plugins/plugins.h"

namespace revive::inject {

// Weak default so the plugins link without the engine; the engine's definition replaces it.
__attribute__((weak)) bool fd_reserved(int) { return false; }

const Plugin kFdPlugin = {
    "fd", 1, [] { return 0; }, plugins::fd_save, [](bool) {}, plugins::fd_restore};

}  // namespace revive::inject
