#pragma once

namespace revive::plugins {

// Resolves every real function the signal wrappers forward to (called from the plugin's init()).
int signal_wrappers_init();
// Same for the waits that take a signal mask (ppoll, pselect, epoll_pwait[2]): wait_wrappers.cpp.
void wait_wrappers_init();

}  // namespace revive::plugins
