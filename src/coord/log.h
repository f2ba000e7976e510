// Coordinator/CLI diagnostics on stderr, filtered by REVIVE_LOG (0 errors only .. 3 debug; default 1).
#pragma once

namespace revive::coord {

int LogLevel();
// printf-style; prefixed with "revive-coord[pid]: ". Level 0 always prints.
void Log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace revive::coord
