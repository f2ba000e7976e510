// Shared by benches: the median over `batches` of the mean time of one call of f, in nanoseconds
// (per_batch calls per batch).
#pragma once

#include <time.h>

#include <algorithm>
#include <vector>

inline double bench_now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

template <typename F>
double median_ns(int batches, long per_batch, F f) {
  std::vector<double> v;
  for (int b = 0; b < batches; ++b) {
    double t0 = bench_now_ns();
    for (long i = 0; i < per_batch; ++i) f();
    v.push_back((bench_now_ns() - t0) / double(per_batch));
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
