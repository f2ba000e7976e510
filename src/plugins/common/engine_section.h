// A critical section of the engine's (inject/plugin.h internal_sections), for wrappers that must never be
// stopped half-way by a checkpoint: the verbs plugin's (no thread stopped inside the device library) and
// the fd plugin's inotify wrappers (a watch the kernel has and the plugin's table not yet). A checkpoint
// request waits until no thread is inside one; a thread that wants in while a checkpoint is coming waits
// for it to be over. Never block inside one.
#pragma once

namespace revive::plugins {

struct EngineSection {
  EngineSection();
  ~EngineSection();
  EngineSection(const EngineSection&) = delete;
  EngineSection& operator=(const EngineSection&) = delete;
};

}  // namespace revive::plugins
