// Text dump of the process state the plugins own, one fact per line, so that the state of a process
// before the checkpoint and after restore can be compared with a string compare.
#pragma once

#include <string>

namespace revive::plugins::test {

// Lines: "fd N ...", "sig N ...", "pending N", "itimer W ...", "rlimit R cur max", "cwd P", "umask M".
// Interval timers' remaining time is rounded to whole seconds (tests arm them at x.25 s, so up to
// 0.75 s may pass before the value printed changes).
std::string dump_state();

}  // namespace revive::plugins::test
