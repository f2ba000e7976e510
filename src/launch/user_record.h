// Per-user runtime record of the computations a user runs: which checkpoint directory the coordinator on
// a port serves, so that `revive checkpoint/status/kill --port P` work without --ckpt-dir for the user
// who launched (the secret lives in that directory; DMTCP's `dmtcp_command --port P` needs nothing
// either). The records live in a directory only that user can use: $XDG_RUNTIME_DIR/revive when it is
// set and ours, else /tmp/revive-<uid>; a directory that is not ours or that others can write is never
// used (a record there could point the command at another computation). Another user finds no record and
// cannot read the secret anyway: they are refused as before.
#pragma once

#include <string>

#include "core/status.h"

namespace revive::launch {

// The directory, created 0700 if missing; an error naming it and the reason if it is unsafe.
Status UserRecordDir(std::string* dir);

// Best effort (a coordinator must start even where no record can be kept): <dir>/port-<port> holds the
// absolute checkpoint directory and the coordinator's pid.
void WriteUserRecord(unsigned port, const std::string& ckpt_dir);
void RemoveUserRecord(unsigned port, const std::string& ckpt_dir);

// The checkpoint directory recorded for `port`, or "" (no record, or an unsafe record directory: *why
// says which, for the message of a command that then fails).
std::string LookupUserRecord(unsigned port, std::string* why);

}  // namespace revive::launch
