#include "lattice.h"

#include "rows.h"

namespace lanczos {

Lattice Lattice::Block(int nx, int ny, int rank, int size, double disorder, uint64_t seed) {
  Lattice L;
  L.nx = nx;
  L.ny = ny;
  const examples::Rows r = examples::SplitRows(ny, rank, size);
  L.y0 = r.y0;
  L.y1 = r.y1;
  L.disorder = disorder;
  L.seed = seed;
  return L;
}

// splitmix64: a fixed, well-mixed hash, so the on-site energy of a site never depends on the run.
static uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Lattice::OnSite(int x, int y) const {
  const uint64_t site = static_cast<uint64_t>(y) * static_cast<uint64_t>(nx) + static_cast<uint64_t>(x);
  const double u = static_cast<double>(Mix(site ^ Mix(seed)) >> 11) * 0x1.0p-53;  // [0,1)
  return disorder * (u - 0.5);
}

void MatVec(const Lattice& L, const double* x, const double* below, const double* above, double* y) {
  const int nx = L.nx, rows = L.y1 - L.y0;
  for (int r = 0; r < rows; ++r) {
    const double* row = x + static_cast<size_t>(r) * nx;
    const double* up = r + 1 < rows ? row + nx : above;     // may be nullptr (open boundary)
    const double* down = r > 0 ? row - nx : below;
    double* out = y + static_cast<size_t>(r) * nx;
    for (int i = 0; i < nx; ++i) {
      double s = (4.0 + L.OnSite(i, L.y0 + r)) * row[i];
      if (i > 0) s -= row[i - 1];
      if (i + 1 < nx) s -= row[i + 1];
      if (down) s -= down[i];
      if (up) s -= up[i];
      out[i] = s;
    }
  }
}

}  // namespace lanczos
