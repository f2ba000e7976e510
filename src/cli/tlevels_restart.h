// `revive restart DIR --hosts ...` of a computation whose transparent images are kept on its hosts
// (REVIVE_LEVELS; docs/storage-levels.md, "Transparent images"): for every image the fastest intact
// level (its host's own L1 copy, else its partner's copy moved over a socket to the host that needs it,
// else the checkpoint directory, L4), newest generation first, falling back to an older one, saying on
// stderr what it chose and why.
#pragma once

#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/hosts.h"
#include "coord/manifest.h"
#include "core/status.h"

namespace revive::cli {

// gen_dir: the newest generation to consider (ckpt-G with MANIFEST.json). *used = false (and nothing
// done) when its images are not kept on the hosts. Otherwise every image of the chosen generation is in
// place (moved where needed), *chosen_gen_dir names it and *parts holds one part per host (each process
// goes back to the host it ran on, which must be in `hosts`), each with `--local-dir`.
Status TLevelsRestart(const HostOpts& ho, const Target& root, const std::vector<std::string>& hosts,
                      const std::string& gen_dir, bool lazy, bool* used, std::string* chosen_gen_dir,
                      std::vector<HostPart>* parts);

// In a part (or a restart on one machine): the path of image p of a generation kept on the hosts, the
// first intact one (its manifest checksum) of local_dir/NAME (--local-dir), the generation directory
// (L4), and <local root>/<host>/<job>/ckpt-G/NAME (hosts simulated on one machine). Errors name each place.
Status ResolveKeptImage(const coord::Manifest& m, const coord::ManifestProc& p, const std::string& gen_dir,
                        const std::string& local_dir, std::string* path);

}  // namespace revive::cli
