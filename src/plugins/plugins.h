// The process-state plugins linked into librevive_inject.so (target `revive_plugins`). The engine lists
// them in src/inject/plugin_list.cpp. Recommended order (restore runs in list order):
//   &kProcPlugin    rlimits first: RLIMIT_NOFILE must allow the fd numbers the fd plugin reopens
//   &kFilesPlugin   contents of written and node-local files, back before the fd plugin reopens them
//   &kFdPlugin
//   &kSignalPlugin  dispositions before pending signals are re-raised and before timers can fire
//   &kTimerPlugin
//   &kChanPlugin    last: replaces the fd plugin's stand-ins for sockets (docs/channels.md)
// See docs/plugins.md for what each saves and its policies.
#pragma once

#include <signal.h>

#include "inject/plugin.h"

namespace revive::inject {

extern const Plugin kProcPlugin;
extern const Plugin kFilesPlugin;
extern const Plugin kFdPlugin;
extern const Plugin kSignalPlugin;
extern const Plugin kTimerPlugin;
extern const Plugin kChanPlugin;

// Implemented by the engine: true for a descriptor the engine itself owns (coordinator socket, image
// file, log...). The fd plugin neither saves such an fd nor lets a restored fd replace it (restore fails
// naming the fd). A weak default returning false lives in the fd plugin, so the plugins link (and their
// tests run) without the engine; the engine's strong definition replaces it.
bool fd_reserved(int fd);

// True for a descriptor that a plugin saves and re-creates itself (the verbs plugin: a device's command
// socket, async and completion-channel pipes, whose other ends belong to the device, outside the
// computation). list_fds() leaves them out, so the fd, files and chan plugins neither save nor refuse
// them. A weak default returning false lives in plugins/common (proc_fds.cpp); the verbs plugin
// defines the real one.
bool fd_owned_by_plugin(int fd);

// True for a path under one of the node-local directories (REVIVE_LOCAL_DIRS), whose contents another
// host does not have. The proc plugin recreates a missing working directory there at restore (a job that
// ran in /tmp/job, restarted on another host). The files plugin defines it; a weak default returning
// false lives in plugins/common (proc_fds.cpp) for builds without it.
bool node_local_path(const char* path);

// The signal plugin interposes sigaction() for the whole process, the engine's own calls included (they
// bind to the exported wrapper). The engine installs its checkpoint-signal handler with this instead:
// libc's real sigaction, untouched by the wrapper. Returns like sigaction(2).
int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// The files plugin's pre-images (files_pre.cpp) ignore the file calls made while this is on: the engine
// sets it around every plugin's save and restore (user threads held), whose opens are not the program's.
void preimage_quiet(bool on);

}  // namespace revive::inject
