// Lowest eigenvalues of the symmetric tridiagonal matrix that Lanczos builds, by Sturm-sequence bisection.
// Own code (about 40 lines) rather than LAPACK: the project takes no LAPACK dependency, and bisection to
// the last representable bit is deterministic, which the byte-for-byte restart comparison relies on.
#ifndef REVIVE_EXAMPLES_LANCZOS_TRIDIAG_H_
#define REVIVE_EXAMPLES_LANCZOS_TRIDIAG_H_

#include <vector>

namespace lanczos {

// alpha[0..m-1] is the diagonal, beta[1..m-1] the off-diagonal (beta[0] unused). Returns the `k` smallest
// eigenvalues in ascending order (fewer if m < k).
std::vector<double> LowestEigenvalues(const std::vector<double>& alpha, const std::vector<double>& beta,
                                      int m, int k);

}  // namespace lanczos

#endif
