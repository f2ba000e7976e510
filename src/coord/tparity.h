// L3 of transparent images (docs/storage-levels.md, "Transparent images"): a group of hosts whose image
// bytes are protected by parity (storage::StripeLayout / ErasureCode: XOR for m = 1, Reed-Solomon for
// m >= 2). A member's data is its images concatenated in name order; each member keeps its parity slots
// in <gen dir>/parity and, in parity.meta, the group's layout: every member's images (name, size, XXH3)
// and its own parity's checksum, so any survivor's meta tells a rebuild what the lost members held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coord/tlx.h"
#include "core/status.h"

namespace revive::coord {

struct TParityMeta {
  int g = 0, m = 1;
  uint64_t block = 0;
  struct Member {
    std::string host;
    std::vector<TlxFile> images;  // in data order
    uint64_t Length() const;
  };
  std::vector<Member> members;    // group order
  uint64_t parity_xxh3 = 0;       // of this member's parity file

  std::string Serialize() const;
  static Status Parse(const std::string& text, const std::string& where, TParityMeta* out);
};

// Member `me` of a group whose data are files_of[j] (paths, any order; sorted by name here): encodes the
// group and writes dir/parity and dir/parity.meta (atomically, parity first). Errors name the file. The
// whole group in memory: the reference the streamed encode (tencode.h) and rebuild (trebuild.h) are tested
// against; restarts and checkpoints use those.
Status TEncodeGroup(const std::vector<std::string>& hosts, const std::vector<std::vector<std::string>>& files_of,
                    int m, size_t me, const std::string& dir);

}  // namespace revive::coord
