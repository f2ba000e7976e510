#pragma once

#include "inject/plugin.h"

namespace revive::plugins {

extern const int kReopenFlags;
int fd_save(inject::SectionWriter& w);
int fd_restore(inject::SectionReader& r, char* msg, size_t cap);

}  // namespace revive::plugins
