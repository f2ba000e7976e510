// Plain Lanczos (no reorthogonalisation, fixed iteration count, like the CRAFT paper's benchmark). The
// state that a checkpoint must hold is exactly `State`: the two newest Lanczos vectors, alpha, beta and the
// iteration counter; everything else is recomputed.
#ifndef REVIVE_EXAMPLES_LANCZOS_SOLVER_H_
#define REVIVE_EXAMPLES_LANCZOS_SOLVER_H_

#include <functional>
#include <vector>

#include "lattice.h"

namespace lanczos {

struct State {
  int iteration = 0;            // number of completed Lanczos steps
  std::vector<double> v_prev;   // v_{j-1} (local rows)
  std::vector<double> v;        // v_j (local rows)
  std::vector<double> alpha;    // alpha[0..m-1]
  std::vector<double> beta;     // beta[0..m], beta[0] = 0
};

// What the solver needs from the parallel environment: a global sum, and the two ghost rows.
struct Parallel {
  std::function<double(double)> sum = [](double x) { return x; };
  // Fills below/above with lattice rows y0-1 and y1; returns false at the open boundary (no row there).
  std::function<void(const Lattice&, const double* x, double* below, double* above, bool* has_below,
                     bool* has_above)> halo;
};

// Sizes the state for m iterations and sets v_0 to a normalised deterministic start vector.
void Init(const Lattice& L, const Parallel& P, int m, State* s);
// One Lanczos step j = s->iteration; increments s->iteration. before_update (if set) runs after the step
// has only read the state and before it writes any of it: a zero-copy checkpoint waits there, so its
// background write overlaps the matrix-vector product.
void Step(const Lattice& L, const Parallel& P, State* s, const std::function<void()>& before_update = {});

}  // namespace lanczos

#endif
