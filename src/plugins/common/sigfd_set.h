// Which descriptors are signalfds, so that reads of them can give each signal's sender as the program
// knows it (virtual pids: src/plugins/vpid). Kept by the wrappers that make or copy descriptors (signalfd,
// dup, dup2, dup3, fcntl F_DUPFD*) and, for descriptors inherited across exec, by one scan of
// /proc/self/fd the first time it matters. close() is not wrapped: a bit may outlive its descriptor, so a
// reader checks that a marked descriptor still is a signalfd before it rewrites anything.
// Async-signal-safe, no allocation: a static bitmap (bss; pages untouched until used).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::plugins {

void sigfd_mark(int fd);                 // fd was just made a signalfd
void sigfd_copied(int from, int to);     // `to` now shares `from`'s description (dup family)
// True when the n bytes a read or readv of fd just returned are signalfd_siginfo records: n is a
// multiple of their size, fd is marked and still a signalfd. The first call scans /proc/self/fd, so a
// signalfd inherited across exec is found (up to 1024 open descriptors then; more: not scanned).
bool sigfd_is(int fd, long n);

}  // namespace revive::plugins
