// `revive ls DIR` / `revive verify DIR` of a transparent checkpoint directory (ckpt-<G>/MANIFEST.json):
// every complete generation, newest first, and whether each level has all of it intact, as far as this
// machine sees every host's node-local storage (a shared root, or hosts simulated as directories, like
// the library's tools): L1 every image on its host, L2 every partner copy, L3 every group member's parity,
// L4 every image in the generation directory — each checked against the manifest's checksums.
#pragma once

#include <string>

namespace revive::cli {

// True when dir holds transparent generations (then the tools below apply, not the library's).
bool IsTransparentCheckpoint(const std::string& dir);

// verify=false: prints the table (or JSON), exit 0. verify=true: also exit 1 unless the newest
// generation has every image intact at some level; the missing ones are named.
int TransparentLs(const char* tool, const std::string& dir, const std::string& local, bool json, bool verify);

}  // namespace revive::cli
