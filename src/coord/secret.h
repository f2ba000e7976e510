// The computation's shared secret: proves to the coordinator that a client belongs to this computation.
#pragma once

#include <string>

#include "core/status.h"

namespace revive::coord {

constexpr size_t kSecretBytes = 32;

// REVIVE_SECRET_FILE if set, else <ckpt_dir>/.revive-secret.
std::string SecretPath(const std::string& ckpt_dir);

// Reads the secret at path; when absent, creates it (0600, 32 bytes from getrandom) first. Creation is
// race-free between a launching CLI and a coordinator: the bytes are written and fsynced in a private
// temporary file that is then link()ed into place, so nobody ever reads a half-written secret.
// Refuses a secret readable by group or others (names the file and the mode).
Status LoadOrCreateSecret(const std::string& path, std::string* secret);

}  // namespace revive::coord
