#pragma once

#include <stdint.h>

#include "inject/plugin.h"

namespace revive::plugins {

extern const int kReopenFlags;
extern int64_t g_max_deleted_bytes;  // set by fd_init from REVIVE_FD_DELETED_MAX_MB
int fd_init();
int fd_save(inject::SectionWriter& w);
int fd_restore(inject::SectionReader& r, char* msg, size_t cap);

}  // namespace revive::plugins
