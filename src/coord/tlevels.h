// Multi-level storage for transparent images of `--hosts` computations (issue 9; docs/storage-levels.md,
// "Transparent images"): the policy (REVIVE_LEVELS, the library's grammar), where a host keeps its images
// (L1: <local root>/<host>/<job id>/ckpt-<G>/, its partner copies in partner-<host>/ below), which host
// keeps whose copy (L2, the library's placement rule over hosts), and the checksums the manifest records.
// Used by the root coordinator (which levels a generation goes to, the manifest), the sub-coordinators
// (each host's part: exchange, background L4 copy, pruning) and `revive restart` (choosing a source).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::coord {

enum TLevel : unsigned { kTL1 = 1, kTL2 = 2, kTL3 = 4, kTL4 = 8 };

struct TLevelsConfig {
  std::string spec;        // REVIVE_LEVELS as given ("" = off: every image goes to the checkpoint directory)
  std::string local_root;  // REVIVE_LOCAL_PATH, else /dev/shm/revive-<uid>
  int group_size = 4;      // REVIVE_GROUP_SIZE: hosts per L3 group
  int parity = 1;          // REVIVE_PARITY: m (1 = XOR, >= 2 = Reed-Solomon)
  int keep = 2;            // REVIVE_KEEP: complete generations kept per level (the library's option)
  // The levels generation g goes to (0 when off).
  unsigned LevelsFor(uint64_t g) const;
  // The union of every rule's levels (0 when off).
  unsigned AnyLevels() const;
};

// Reads REVIVE_LEVELS / REVIVE_LOCAL_PATH / REVIVE_GROUP_SIZE / REVIVE_PARITY / REVIVE_KEEP; InvalidArgument quoting a
// malformed policy.
Status LoadTLevelsConfig(TLevelsConfig* out);

std::string TLevelNames(unsigned levels);               // "L1+L2+L4"
unsigned ParseTLevelNames(const std::string& names);    // inverse; unknown words ignored

// "t-<16 hex of XXH3-64 of the checkpoint directory>": two computations never share a local directory.
std::string TJobId(const std::string& ckpt_dir);
// <root>/<host>/<job>
std::string THostJobDir(const std::string& root, const std::string& host, const std::string& job);
// <root>/<host>/<job>/ckpt-<G>
std::string TLocalGenDir(const std::string& root, const std::string& host, const std::string& job, uint64_t g);
// Where host `holder` keeps the copies of host `owner`'s images of generation g.
std::string TPartnerDir(const std::string& root, const std::string& holder, const std::string& job, uint64_t g,
                        const std::string& owner);

// partner[i] = index of the host keeping host i's copy (storage::Partners over hosts as domains).
Status THostPartners(const std::vector<std::string>& hosts, std::vector<size_t>* partner);

// L3 groups over hosts (storage::FormGroups, hosts as domains): groups[i] = member hosts in order.
Status THostGroups(const std::vector<std::string>& hosts, int group_size, int parity,
                   std::vector<std::vector<std::string>>* groups);

// "h1,h2,h3" -> {h1, h2, h3}; "" -> {} (host lists in PHASE frames, the manifest's l3, command lines).
std::vector<std::string> TSplitList(const std::string& list);

// XXH3-64 of a whole file; errors name the file.
Status FileXxh3(const std::string& path, uint64_t* h);
std::string Hex64(uint64_t v);
bool ParseHex64(const std::string& s, uint64_t* v);

// Copies src into dst_dir under its base name: a temporary file, fsync, rename, directory fsync.
Status TCopyDurable(const std::string& src, const std::string& dst_dir);

// Keeps the `keep` newest generations under host_job_dir that are complete (ckpt_dir/ckpt-<G>/MANIFEST.json)
// and everything newer than the newest complete one (in progress); removes the rest. Best effort.
void TPruneLocal(const std::string& host_job_dir, const std::string& ckpt_dir, size_t keep);

// The checkpoint directory per level (the rule: old versions are removed at a level only after
// newer ones are complete there). L4: a generation is complete when its MANIFEST exists and every image it
// lists is in ckpt-<G>/ (copies land under a temporary name, so a present image is whole); the images of
// generations older than the `keep`-th newest complete one are removed. Local levels: a generation with L1
// is complete there when its MANIFEST exists; once it is older than the `keep`-th newest such one (the
// hosts prune their pieces by the same rule, TPruneLocal) and it holds no kept L4 copy, nothing restores
// it and ckpt-<G>/ goes (MANIFEST included, so a restart does not try it). Generations without L1 are
// left alone (as without levels). Called by every host after its L4 copy, concurrently: each decides
// from what is complete, which only grows, so they agree or one removes less. Best effort.
void TPruneGlobal(const std::string& ckpt_dir, size_t keep);

// What a host does after a successful resume, in the background (a sub-coordinator for its host, the root
// of a one-host computation for its own): copies its images of generation `gen` to ckpt_dir/ckpt-<gen>
// when `levels` has L4, then prunes each of its host job directories (TPruneLocal) and the checkpoint
// directory (TPruneGlobal). Failed copies are logged.
void TFlushAndPrune(unsigned levels, uint64_t gen, const std::vector<std::string>& images,
                    const std::vector<std::string>& host_job_dirs, const std::string& ckpt_dir, size_t keep);

}  // namespace revive::coord
