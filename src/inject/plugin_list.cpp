// The plugins linked into the engine, in the order their events run (docs/contracts.md). The references
// are weak so the engine links and runs while a plugin is not built (yet); a missing one is skipped.
#include "inject/plugin.h"

namespace revive::inject {

extern const Plugin kProcTreePlugin __attribute__((weak));
extern const Plugin kProcPlugin __attribute__((weak));
extern const Plugin kFilesPlugin __attribute__((weak));
extern const Plugin kFdPlugin __attribute__((weak));
extern const Plugin kSignalPlugin __attribute__((weak));
extern const Plugin kTimerPlugin __attribute__((weak));
extern const Plugin kChanPlugin __attribute__((weak));
extern const Plugin kVerbsPlugin __attribute__((weak));

// Order recommended by the plugins' author (src/plugins/plugins.h): limits before fds, dispositions
// before timers can fire; channels last (they replace the fd plugin's stand-ins for sockets).
// files before fd: contents are written back before descriptors are reopened and size-checked.
// verbs last: its fds are left out of the others' (fd_owned_by_plugin); its save may refuse for now.
// proctree first: it refuses a checkpoint that would split a fork before the others do any work.
const Plugin* const kPlugins[] = {&kProcTreePlugin, &kProcPlugin, &kFilesPlugin, &kFdPlugin, &kSignalPlugin, &kTimerPlugin, &kChanPlugin,
                                     &kVerbsPlugin};
const size_t kPluginCount = sizeof kPlugins / sizeof kPlugins[0];

}  // namespace revive::inject
