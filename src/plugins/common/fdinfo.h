// Reading /proc/self/fdinfo/<fd> without stdio or malloc: the kernel's own description of an eventfd's
// counter or a timerfd's settings (there is no other way to read them without consuming them).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::plugins {

// Loads /proc/self/fdinfo/<fd> into buf (nul-terminated). False if it cannot be read.
bool fdinfo_load(int fd, char* buf, size_t cap);
// The number at p (after blanks) in base 10 or 16 (lower-case digits, as the kernel writes them): the
// first character after it, or nullptr when there is no digit (*out is then 0). The one number parser of
// every fdinfo reader (epoll items, inotify watches, locks).
const char* fdinfo_parse(const char* p, int base, uint64_t* out);
// The number after "<key>:" in base 10 or 16; false if the key is absent.
bool fdinfo_num(const char* info, const char* key, int base, uint64_t* out);
// The pair "(a, b)" after "<key>:" (timerfd's it_value/it_interval: seconds, nanoseconds).
bool fdinfo_pair(const char* info, const char* key, uint64_t* a, uint64_t* b);

}  // namespace revive::plugins
