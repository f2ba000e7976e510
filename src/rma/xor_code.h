// Distributed XOR parity over a checksum group (SCR's XOR scheme, the ftRMA paper's checksum groups with
// the checksum spread over the members instead of held by extra ranks; docs/rma.md says why).
//
// Pure byte arithmetic, no MPI: the library feeds these buffers to MPI_Reduce_scatter_block / MPI_Reduce
// with MPI_BXOR. A group has k >= 2 members; member m's data (padded with zeros to (k-1)·c bytes, c =
// ChunkBytes) is cut into k-1 chunks. Member j holds the parity P_j = XOR over m != j of chunk
// idx(m, j) = (j - m - 1) mod k of member m. Every chunk of every member is in exactly one parity, and
// never in its own member's, so any one member can be rebuilt from the others' data and parities.
#pragma once

#include <cstddef>
#include <cstdint>

namespace revive::rma {

size_t ChunkBytes(size_t bytes, int k);
inline int ChunkIndex(int m, int j, int k) { return ((j - m - 1) % k + k) % k; }
// The member that holds chunk t of member f in its parity.
inline int ParityHolder(int f, int t, int k) { return (f + 1 + t) % k; }

// out: k·c bytes. Slot j (j != me) = my chunk ChunkIndex(me, j, k); slot me = zeros. XOR-reduced and
// scattered (slot j to member j) it gives every member its parity. `stride` (>= c; 0: c) puts slot j at
// out + j·stride, leaving room after each chunk for what the caller sends along (its bytes untouched).
void ParityContribution(const uint8_t* data, size_t bytes, int k, int me, uint8_t* out, size_t stride = 0);

// out: (k-1)·c bytes, from survivor `me` towards rebuilding member `f` (me != f). Slot t is what `me`
// adds to chunk t of f: its parity if it holds chunk t, else its own chunk that shares that parity.
// The XOR of all k-1 survivors' buffers is f's data (padded).
void RebuildContribution(const uint8_t* data, size_t bytes, const uint8_t* parity, int k, int me, int f,
                         uint8_t* out);

}  // namespace revive::rma
