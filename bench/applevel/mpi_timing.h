// Timing helpers of the MPI benchmarks: the median of repetitions and the slowest rank's time of a step.
#ifndef REVIVE_BENCH_APPLEVEL_MPI_TIMING_H_
#define REVIVE_BENCH_APPLEVEL_MPI_TIMING_H_

#include <mpi.h>

#include <algorithm>
#include <vector>

namespace bench {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs f on every rank between barriers; returns the slowest rank's time (negative if f failed anywhere).
template <class F>
double Timed(F&& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  const bool ok = f();
  double mine = ok ? MPI_Wtime() - t0 : -1e9, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);  // any failure wins
  if (slowest < 0) return -1;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace bench

#endif  // REVIVE_BENCH_APPLEVEL_MPI_TIMING_H_
