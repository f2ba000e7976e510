// Process states the restore tests set up before a checkpoint, exercise after it (in the original and in
// the restored process: both must print the same), and change after the checkpoint (policy tests).
#pragma once

#include <string>

namespace revive::plugins::test {

bool known_scenario(const std::string& name);
void setup(const std::string& name, const std::string& dir);
// What the engine restores before the plugins run (the per-thread signal mask) in the restored process.
void engine_side(const std::string& name);
std::string exercise(const std::string& name, const std::string& dir);
void after_checkpoint(const std::string& name, const std::string& dir);

}  // namespace revive::plugins::test
