#include "solver.h"

#include <cmath>
#include <cstdint>

namespace lanczos {

static double Dot(const Parallel& P, const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return P.sum(s);
}

void Init(const Lattice& L, const Parallel& P, int m, State* s) {
  const size_t n = L.local_rows();
  s->iteration = 0;
  s->v_prev.assign(n, 0.0);
  s->v.assign(n, 0.0);
  s->alpha.assign(static_cast<size_t>(m), 0.0);
  s->beta.assign(static_cast<size_t>(m) + 1, 0.0);
  // Start vector from the global site index only, so it is the same for any rank count.
  for (size_t i = 0; i < n; ++i) {
    const uint64_t g = static_cast<uint64_t>(L.y0) * static_cast<uint64_t>(L.nx) + i;
    s->v[i] = 1.0 + 0.5 * std::sin(0.001 * static_cast<double>(g));
  }
  const double norm = std::sqrt(Dot(P, s->v, s->v));
  for (double& x : s->v) x /= norm;
}

void Step(const Lattice& L, const Parallel& P, State* s, const std::function<void()>& before_update) {
  const size_t n = L.local_rows();
  const int j = s->iteration;
  std::vector<double> below(static_cast<size_t>(L.nx)), above(static_cast<size_t>(L.nx)), w(n);
  bool has_below = false, has_above = false;
  if (P.halo) P.halo(L, s->v.data(), below.data(), above.data(), &has_below, &has_above);
  MatVec(L, s->v.data(), has_below ? below.data() : nullptr, has_above ? above.data() : nullptr, w.data());
  const double b = s->beta[static_cast<size_t>(j)];
  for (size_t i = 0; i < n; ++i) w[i] -= b * s->v_prev[i];
  const double a = Dot(P, w, s->v);
  for (size_t i = 0; i < n; ++i) w[i] -= a * s->v[i];
  const double nb = std::sqrt(Dot(P, w, w));
  if (before_update) before_update();
  s->alpha[static_cast<size_t>(j)] = a;
  s->beta[static_cast<size_t>(j) + 1] = nb;
  s->v_prev.swap(s->v);
  // An exact invariant subspace (nb == 0) cannot happen for this matrix at these sizes; guard anyway.
  const double inv = nb > 0.0 ? 1.0 / nb : 0.0;
  for (size_t i = 0; i < n; ++i) s->v[i] = w[i] * inv;
  s->iteration = j + 1;
}

}  // namespace lanczos
