// `revive restart`: puts back the pre-images of a generation (files changed after its checkpoint that
// its images do not hold; src/plugins/files/files_pre.cpp, docs/plugins.md "files") before any process
// of it is restored.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace revive::cli {

struct Preimages;  // what CheckPreimages read
struct PreimagesDeleter {
  void operator()(Preimages* p) const;
};
using PreimageList = std::unique_ptr<Preimages, PreimagesDeleter>;

// Reads and checks every record of gen_dir/.pre and its contents (length, XXH3): a damaged or missing one
// is an error naming the file and the pre-image. Writes nothing (run it before anything is started).
Status CheckPreimages(const std::string& gen_dir, PreimageList* out);
// Writes each checked file back in place (contents, size, mode, owner when permitted, mtime); returns how
// many files were put back.
Status RestorePreimages(const Preimages& list, size_t* restored);

}  // namespace revive::cli
