// 2-D heat diffusion, explicit 5-point stencil, on an nx*ny grid distributed over ranks by blocks of whole
// rows. Fixed (Dirichlet) edges: the top edge is held at 1, the others at 0. The local block carries one
// ghost row above and below, so a step needs the neighbours' edge rows first.
#ifndef REVIVE_EXAMPLES_HEAT2D_STENCIL_H_
#define REVIVE_EXAMPLES_HEAT2D_STENCIL_H_

#include <cstddef>
#include <vector>

namespace heat2d {

struct Block {
  int nx = 0, ny = 0;  // global grid
  int y0 = 0, y1 = 0;  // owned rows [y0, y1)
  int rows() const { return y1 - y0; }
  // Field with ghost rows: row r of the block is at (r + 1) * nx; rows 0 and rows()+1 are ghosts.
  size_t padded() const { return static_cast<size_t>(nx) * static_cast<size_t>(rows() + 2); }
};

Block Split(int nx, int ny, int rank, int size);
// Deterministic initial field (interior) and the fixed boundary values in the ghost rows at the edges.
void Init(const Block& b, std::vector<double>* u);
// One explicit step from u into next (ghost rows of u must be current). Coefficient r <= 0.25 is stable.
void Step(const Block& b, double r, const std::vector<double>& u, std::vector<double>* next);

}  // namespace heat2d

#endif
