#include "tridiag.h"

#include <algorithm>
#include <cmath>

namespace lanczos {

// Number of eigenvalues of T strictly less than x (Sturm count through the LDL^T pivots).
static int CountBelow(const std::vector<double>& a, const std::vector<double>& b, int m, double x) {
  int count = 0;
  double d = 1.0;
  for (int i = 0; i < m; ++i) {
    const double off = i > 0 ? b[i] * b[i] : 0.0;
    d = (a[i] - x) - (i > 0 ? off / d : 0.0);
    if (d == 0.0) d = -1e-300;  // a zero pivot counts as negative; keeps the recurrence finite
    if (d < 0.0) ++count;
  }
  return count;
}

std::vector<double> LowestEigenvalues(const std::vector<double>& alpha, const std::vector<double>& beta,
                                      int m, int k) {
  // Gershgorin bounds enclose every eigenvalue.
  double lo = 0.0, hi = 0.0;
  for (int i = 0; i < m; ++i) {
    const double r = (i > 0 ? std::fabs(beta[i]) : 0.0) + (i + 1 < m ? std::fabs(beta[i + 1]) : 0.0);
    lo = i == 0 ? alpha[i] - r : std::min(lo, alpha[i] - r);
    hi = i == 0 ? alpha[i] + r : std::max(hi, alpha[i] + r);
  }
  lo -= 1.0;  // margins keep the bisection invariant strict at the ends
  hi += 1.0;
  std::vector<double> out;
  for (int j = 0; j < std::min(k, m); ++j) {
    double a = lo, b = hi;  // invariant: CountBelow(a) <= j < CountBelow(b)
    for (int it = 0; it < 2000; ++it) {
      const double mid = a + (b - a) / 2;
      if (mid <= a || mid >= b) break;  // interval is two adjacent doubles: full precision reached
      if (CountBelow(alpha, beta, m, mid) > j) b = mid; else a = mid;
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace lanczos
