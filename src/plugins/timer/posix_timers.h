// POSIX timers (timer_create). The kernel does not list a process's timers in a form usable from inside
// (/proc/self/timers lacks the remaining time), and glibc hands the program an id it computes, so
// timer_create/timer_delete are interposed to keep a table of the live timers. Restore recreates each with
// its old kernel id (prctl PR_TIMER_CREATE_RESTORE_IDS, Linux 6.16+), so the program's timer_t stays valid.
#pragma once

#include "plugins/common/section_io.h"

namespace revive::plugins {

int posix_timers_init();
bool posix_timers_save(Out& out);
// Reads the POSIX-timer part of the timer section and recreates the timers. 0 or -errno (message in msg).
int posix_timers_restore(In& in, char* msg, size_t cap);

}  // namespace revive::plugins
