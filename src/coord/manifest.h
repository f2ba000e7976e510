// MANIFEST.json of a checkpoint generation: written by the coordinator once every image is durable; its
// presence is what makes ckpt-<G> complete (docs/contracts.md "Checkpoint directory layout").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace revive::coord {

struct ManifestProc {
  uint64_t upid = 0;
  uint64_t pid = 0;
  std::string host;
  std::string prog;
  std::string image;  // file name inside the generation directory
  uint64_t bytes = 0;
  // Multi-level storage of transparent images (tlevels.h; only when the generation has levels): the
  // image is kept on `host` (L1), a copy on host `l2` (L2, "" if none), and its XXH3-64.
  bool local = false;
  std::string l2;
  std::string l3;  // L3: the hosts of its group, comma-separated, in group order ("" if none)
  uint64_t xxh3 = 0;
};

struct Manifest {
  uint64_t generation = 0;
  double time = 0;  // seconds since the epoch, when the generation completed
  std::vector<ManifestProc> procs;
  // Where the images of a generation with levels are (empty levels: all in the generation directory).
  std::string levels;      // "L1+L2+L4"
  std::string local_root;  // node-local root: a host's images are in <local_root>/<host>/<job>/ckpt-<G>/
  std::string job;         // TJobId of the checkpoint directory
  uint64_t parity = 0;     // L3: m parity blocks per stripe
};

std::string GenerationDir(const std::string& ckpt_dir, uint64_t generation);  // <dir>/ckpt-<G>

// tmp + fsync + rename + dir fsync (core's WriteFileAtomic) of <gen_dir>/MANIFEST.json.
Status WriteManifest(Env* env, const std::string& gen_dir, const Manifest& m);
// Parses and validates; errors name the file and the key.
Status ReadManifest(Env* env, const std::string& path, Manifest* m);

// Highest G with ckpt-<G>/MANIFEST.json (complete) -> *gen; NotFound if none. *max_seen = highest G of any
// ckpt-<G> directory, complete or not (the coordinator numbers the next generation above it).
Status FindNewestGeneration(Env* env, const std::string& ckpt_dir, uint64_t* gen, uint64_t* max_seen);
// Every complete G (ckpt-<G>/MANIFEST.json), newest first.
Status ListCompleteGenerations(Env* env, const std::string& ckpt_dir, std::vector<uint64_t>* gens);

}  // namespace revive::coord
