#pragma once

namespace revive::plugins {

// Resolves every real function the signal wrappers forward to (called from the plugin's init()).
int signal_wrappers_init();

}  // namespace revive::plugins
