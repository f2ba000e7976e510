// The plugin's own walk of a /proc tree (vpid_ftw.cpp): the nftw/ftw wrappers use it under /proc while a
// virtual-pid table is mapped; tests/vpid/ftw_test.cpp compares it with glibc's.
#pragma once

#include <ftw.h>
#include <sys/stat.h>

namespace revive::vpid {

// nftw (fn) or ftw (ftw_fn, fn null) of `root` through the plugin's own directory and stat wrappers.
int walk_tree(const char* root, int (*fn)(const char*, const struct stat*, int, struct FTW*),
              int (*ftw_fn)(const char*, const struct stat*, int), int flags);

}  // namespace revive::vpid
