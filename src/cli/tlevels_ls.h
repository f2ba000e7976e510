// `revive ls DIR` / `revive verify DIR` of a transparent checkpoint directory (ckpt-<G>/MANIFEST.json):
// every complete generation, newest first, and whether each level has all of it intact, as far as this
// machine sees every host's node-local storage (a shared root, or hosts simulated as directories, like
// the library's tools): L1 every image on its host, L2 every partner copy, L3 every group member's parity,
// L4 every image in the generation directory — each checked against the manifest's checksums. Or, with
// --hosts, as the hosts themselves see their storage (each asked through the launcher).
#pragma once

#include <string>

#include "cli/hosts.h"

namespace revive::cli {

// True when dir holds transparent generations (then the tools below apply, not the library's).
bool IsTransparentCheckpoint(const std::string& dir);

// verify=false: prints the table (or JSON), exit 0. verify=true: also exit 1 unless the newest
// generation has every image intact at some level; the missing ones are named. With placement options
// (--hosts, --launcher) each listed host is asked what it keeps, as `revive restart --hosts` does.
int TransparentLs(const char* tool, const std::string& dir, const std::string& local, bool json, bool verify,
                  const HostOpts& ho);

}  // namespace revive::cli
