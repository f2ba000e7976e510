// `revive restart`: puts back the pre-images of a generation (files changed after its checkpoint that
// its images do not hold; src/plugins/files/files_pre.cpp, docs/plugins.md "files") before any process
// of it is restored.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::cli {

struct Preimages;  // what CheckPreimages read
struct PreimagesDeleter {
  void operator()(Preimages* p) const;
};
using PreimageList = std::unique_ptr<Preimages, PreimagesDeleter>;

// Which records a restart puts back: all (a restart on this machine), or, in a host's part of `revive
// restart --hosts`, those made on its host (records say where their file was: node-local files differ
// per host), the first part also those of every host that has no part (and of records that do not say).
// `here`: the files of cut-back records are on this machine (not so for the root of --hosts): check them.
struct PreimageFilter {
  bool all = true;
  bool except = false;             // !all: records made on `hosts` (except: on none of them)
  std::vector<std::string> hosts;  // "" = a record that names no host (version 1)
  bool here = true;
};
// --pre-hosts SPEC (a host's part): "=HOST" (records made there) or "!HOST,HOST..." (made anywhere else).
Status ParsePreHosts(const std::string& spec, PreimageFilter* f);
// The SPEC for each of `parts` (their hosts, in order): its own host; the first part, every other.
std::vector<std::string> PreHostsSpecs(const std::vector<std::string>& parts);

// Reads and checks every record of gen_dir/.pre (a damaged or foreign one is an error naming the record
// and, when it can be read, its file), then, of the records the filter keeps, each copy's contents
// (length, XXH3) and each cut-back record's file (same file, at least as long as at the checkpoint): an
// error names the file and the record. Writes nothing (run it before anything is started).
// A cut-back record whose file is gone (removed by hand between the kill and the restart) is not an error
// when the generation's images write that file back themselves (a node-local or written file: saved
// whole at the checkpoint): `restored_by_images` (optional; asked only then) says so, and the record is
// dropped with a note on stderr. Without such a copy the file's checkpoint bytes are lost: the error stands.
Status CheckPreimages(const std::string& gen_dir, const PreimageFilter& f, PreimageList* out,
                      const std::function<bool(const std::string&)>& restored_by_images = {});
// Writes each kept file back in place (copies: contents, size; cut-back records: the size; both: mode,
// owner when permitted, mtime); returns how many files were put back.
Status RestorePreimages(const Preimages& list, size_t* restored);

}  // namespace revive::cli
