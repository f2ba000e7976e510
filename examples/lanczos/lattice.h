// The Lanczos example's matrix: a 2-D square-lattice tight-binding Hamiltonian (5-point Laplacian) with
// deterministic pseudo-random on-site energies, generated on the fly (never stored), as in the CRAFT paper's
// benchmark. Rows are distributed over ranks in blocks of whole lattice rows, so a matrix-vector product
// needs one ghost lattice row from each neighbouring rank.
#ifndef REVIVE_EXAMPLES_LANCZOS_LATTICE_H_
#define REVIVE_EXAMPLES_LANCZOS_LATTICE_H_

#include <cstddef>
#include <cstdint>

namespace lanczos {

struct Lattice {
  int nx = 0, ny = 0;       // global lattice size; matrix dimension nx*ny
  int y0 = 0, y1 = 0;       // this rank owns lattice rows [y0, y1)
  double disorder = 1.0;    // on-site energies uniform in [-disorder/2, disorder/2]
  uint64_t seed = 1;

  // Splits ny rows over `size` ranks as evenly as possible.
  static Lattice Block(int nx, int ny, int rank, int size, double disorder, uint64_t seed);
  size_t local_rows() const { return static_cast<size_t>(nx) * static_cast<size_t>(y1 - y0); }
  double OnSite(int x, int y) const;  // depends only on the global site, so any rank count gives one matrix
};

// y = H x on this rank's rows. `below` is lattice row y0-1 and `above` row y1 (nullptr at the open
// boundary of the lattice).
void MatVec(const Lattice& L, const double* x, const double* below, const double* above, double* y);

}  // namespace lanczos

#endif
