// The distributed rebuild of a lost member of a transparent L3 group (docs/storage-levels.md, "Transparent
// images"): the surviving members stream to the rebuilding host only the blocks its decode needs, in
// pieces, and it writes nothing but the rebuilt member's images, parity and parity.meta (byte for byte what
// the whole-group rebuild TRebuildMember wrote from the survivors' files gathered on its disk).
//
// Layout (storage::StripeLayout, the checkpoint's: every survivor's parity.meta describes it): the lost
// member L has one block in every stripe, a data block or a parity block. A stripe is needed when L holds
// parity in it, or a data block with real bytes (below L's length). For a needed stripe the sources are
// the first k of its blocks, in the code's order (data positions 0..k-1, then parity 0..m-1), whose member
// is neither L nor `unusable` (members the restart's scan found lost or damaged). Every survivor computes
// the same choice from the same meta and list and sends, for each needed stripe in ascending order where it
// is a source, its block: a data block's real bytes (padding is implied), or its whole parity block. The
// rebuilder reads the streams in the same order, k + m pieces of at most kTChunk bytes in memory, decodes
// (ErasureCode::Reconstruct), and writes L's data (its blocks in ascending stripe order are its bytes in
// order) and parity sequentially. Bytes received: at most k blocks per stripe (not every survivor's images
// and parity), each checked end to end (XXH3 of the stream) and the rebuilt images against parity.meta. The
// survivors' files are not checksummed again here: the restart's scan just did (a member whose images or
// parity did not match is `unusable`); a source byte changed since then shows in the rebuilt images'
// checksums when it feeds them, not when it feeds only the lost member's rebuilt parity.
//
// Protocol, on the rebuilder's listener (tlx.h: the connection proves the secret first), one connection per
// survivor:  "tlreb 1 <gen> <from> <meta bytes> <block bytes>\n" <parity.meta> <blocks> "<xxh3 hex>\n",
// answered "OK\n" or "ERR <reason>\n" once the rebuild is written (or failed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::coord {

struct TRebuildStats {
  uint64_t received = 0;  // block bytes on the wire (the rebuilder), or sent (a survivor)
  int sources = 0;        // survivors that sent (the rebuilder)
};

// A survivor: sends its part of the rebuild of `lost` from dir (its generation directory: parity,
// parity.meta and its images) to the rebuilder at addr. unusable: the other members that serve nothing.
Status TRebuildSend(const std::string& addr, const std::string& secret, uint64_t gen, const std::string& from_host,
                    const std::string& dir, const std::string& lost, const std::vector<std::string>& unusable,
                    double timeout_s, TRebuildStats* stats = nullptr);

// The rebuilder: accepts every member of the group but `lost` and `unusable` on listen_fd, rebuilds lost's
// images (checked against parity.meta), parity and parity.meta into dest_dir (created), atomically per file.
// Errors name the member or the file; a wrong group (more lost than the parity tolerates, a member of
// another group or generation) is refused by name.
Status TRebuildReceive(int listen_fd, const std::string& secret, uint64_t gen, const std::string& lost,
                       const std::vector<std::string>& unusable, const std::string& dest_dir, double timeout_s,
                       TRebuildStats* stats = nullptr);

}  // namespace revive::coord
