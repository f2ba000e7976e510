// A short name of this machine (and boot) for coordinator keys that carry kernel object numbers (inodes,
// pids): equal numbers of two hosts are never taken for one object. The first 8 hex digits of the
// kernel's boot id ("0" when unreadable), read once and cached in static storage, so a restored process
// (maybe on another host) keeps naming its objects as its checkpoint did. Async-signal-safe: open/read
// into a static buffer, no allocation, no lock (callers run on the checkpoint thread only).
#pragma once

#include <stddef.h>

namespace revive::plugins {

const char* host_tag();
// "<boot id's 8 hex digits>-<inode of /proc/self/ns/NS>", read afresh (not cached: a restored process
// names where it runs now): NS "net" for ports (chan_portmap.cpp), "mnt" for node-local directories
// (files_walker.cpp).
void host_now(char* out, size_t cap, const char* ns);

}  // namespace revive::plugins
