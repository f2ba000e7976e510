// The distributed L3 encode of transparent images (docs/storage-levels.md, "Transparent images"): the
// members of a parity group compute the same parity files TEncodeGroup (tparity.h) computes from the whole
// group's data, but each member receives only the blocks of the stripes whose parity it keeps (SCR's
// redset layout, storage::StripeLayout), streamed in bounded pieces, never a whole image in memory.
//
// Bytes per member, with g members, m parity blocks per stripe, k = g - m, data D_i (member i's images),
// Lmax = max D_i and block B = Lmax / k (rounded up to 64): member i keeps the parity of m stripes and
// receives, for each, the k data blocks of the other members (only their real bytes, padding is implied):
// at most m k B ~ m Lmax bytes, read into k + 1 buffers of kChunk bytes. It sends each of its k blocks to
// the m holders of that stripe's parity: m D_i bytes. XOR (m = 1): about D in, D out, where the all-to-all
// exchange it replaces sent (g - 1) D and wrote (g - 1) D to disk before reading it back whole.
//
// Protocol, on the members' L3 exchange listeners (tlx.h: the connection proves the secret first), two
// connections from every member to every other, in two rounds:
//   "tlenc 1 <gen> <from> list <n>\n" n x "<name> <size> <xxh3 hex>\n"          answered "OK\n"
//   "tlenc 1 <gen> <from> blocks <bytes>\n" <bytes> "<xxh3 hex of them>\n"      answered "OK\n" or "ERR ...\n"
// A member sends its blocks once it has every member's list (the layout needs Lmax); its blocks for
// holder i are, for each of i's parity slots in order, its real bytes of its block in that stripe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::coord {

struct TEncodeStats {
  uint64_t sent = 0, received = 0;  // block bytes on the wire, this member
};

// Member `me` of the group `hosts` (exchange addresses `addrs`, listening itself on listen_fd) with its
// images `paths` (their XXH3 in xxh3, same order): writes dir/parity and dir/parity.meta, identical to
// TEncodeGroup's. Every member must call it at the same time. Errors name the peer host or the file.
// writers (g flags, all when null): the members that write their parity; the others only send their
// blocks to them (the parity written again at a restart for the hosts that lost theirs: `revive
// tlevels-encode`). Every member must be given the same flags.
Status TEncodeDistributed(const std::vector<std::string>& hosts, const std::vector<std::string>& addrs, size_t me,
                          const std::vector<std::string>& paths, const std::vector<uint64_t>& xxh3, int m,
                          int listen_fd, const std::string& secret, uint64_t gen, double timeout_s,
                          const std::string& dir, TEncodeStats* stats = nullptr,
                          const std::vector<bool>* writers = nullptr);

}  // namespace revive::coord
