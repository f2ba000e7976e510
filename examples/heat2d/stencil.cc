#include "stencil.h"

#include <cmath>

#include "rows.h"

namespace heat2d {

Block Split(int nx, int ny, int rank, int size) {
  Block b;
  b.nx = nx;
  b.ny = ny;
  const examples::Rows r = examples::SplitRows(ny, rank, size);
  b.y0 = r.y0;
  b.y1 = r.y1;
  return b;
}

void Init(const Block& b, std::vector<double>* u) {
  u->assign(b.padded(), 0.0);
  for (int r = 0; r < b.rows(); ++r) {
    const int y = b.y0 + r;
    for (int x = 0; x < b.nx; ++x) {
      (*u)[static_cast<size_t>(r + 1) * b.nx + x] =
          0.5 + 0.25 * std::sin(0.05 * x) * std::cos(0.07 * y);  // from global coordinates only
    }
  }
  if (b.y0 == 0) {  // the row above the grid is the hot edge
    for (int x = 0; x < b.nx; ++x) (*u)[static_cast<size_t>(x)] = 1.0;
  }
}

void Step(const Block& b, double r, const std::vector<double>& u, std::vector<double>* next) {
  const int nx = b.nx;
  next->assign(u.begin(), u.end());  // ghost rows and fixed left/right columns carry over
  for (int row = 1; row <= b.rows(); ++row) {
    const size_t c = static_cast<size_t>(row) * nx;
    for (int x = 1; x + 1 < nx; ++x) {
      const double centre = u[c + x];
      (*next)[c + x] = centre + r * (u[c + x - 1] + u[c + x + 1] + u[c - nx + x] + u[c + nx + x] - 4 * centre);
    }
  }
}

}  // namespace heat2d
