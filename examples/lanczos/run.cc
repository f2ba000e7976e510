#include "run.h"

#include <chrono>
#include <functional>
#include <string>

#include "tridiag.h"

namespace lanczos {

RunResult Run(const Config& c, const Lattice& L, const Parallel& P, revive::Checkpoint& cp, bool print) {
  RunResult res;
  State s;
  Init(L, P, c.iters, &s);
  // The whole state of the iteration: the two newest vectors, alpha, beta and the step counter.
  cp.add("v_prev", s.v_prev);
  cp.add("v", s.v);
  cp.add("alpha", s.alpha);
  cp.add("beta", s.beta);
  cp.add("steps", &s.iteration);
  cp.commit();

  int64_t it = 1;
  if (cp.restart_if_needed(&it)) {
    // The checkpoint of iteration k holds the state after k steps; the loop continues at k + 1.
    // The vectors are resizable, so the library accepts any stored length: check that the checkpoint
    // belongs to this problem (lattice size, rank count, iteration count) before using it.
    if (s.iteration != it - 1 || s.alpha.size() != static_cast<size_t>(c.iters) ||
        s.v.size() != L.local_rows() || s.v_prev.size() != L.local_rows()) {
      throw revive::Error(cp.directory() + ": written by another configuration (" + std::to_string(s.v.size()) +
                          " local rows, " + std::to_string(s.alpha.size()) + " iterations, step " +
                          std::to_string(s.iteration) + "; this run has " + std::to_string(L.local_rows()) +
                          " local rows, " + std::to_string(c.iters) + " iterations, step " +
                          std::to_string(it - 1) + "): use --fresh or another --dir");
    }
    res.restarted_from = static_cast<int>(it - 1);
    if (!c.quiet && print) std::fprintf(stderr, "lanczos: restarted after iteration %d\n", res.restarted_from);
  }
  const bool zero_copy = c.async == "zero";
  const auto t0 = std::chrono::steady_clock::now();
  // Zero-copy: the writer may still read v, v_prev, alpha and beta; Step waits for it only when it is
  // about to overwrite them, after the matrix-vector product.
  // The time inside checkpoint calls is the checkpoint's direct cost to the solver, which a loaded
  // machine's scheduling noise in the total loop time can hide (bench/applevel prints both).
  using Clock = std::chrono::steady_clock;
  Clock::duration in_cp{};
  const auto timed = [&in_cp](auto&& call) {
    const auto a = Clock::now();
    call();
    in_cp += Clock::now() - a;
  };
  const std::function<void()> wait_writer = [&] { timed([&] { cp.wait(); }); };
  for (; it <= c.iters; ++it) {
    Step(L, P, &s, zero_copy ? wait_writer : std::function<void()>{});
    timed([&] { cp.update_and_write(it, c.every); });
  }
  const Clock::duration before_final = in_cp;
  timed([&] { cp.wait(); });
  res.final_wait = std::chrono::duration<double>(in_cp - before_final).count();
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  res.in_checkpoint = std::chrono::duration<double>(in_cp).count();

  if (print) {
    std::printf("lanczos: %dx%d lattice (n=%lld), disorder %g, seed %llu, %d iterations\n", L.nx, L.ny,
                static_cast<long long>(L.nx) * L.ny, L.disorder, static_cast<unsigned long long>(L.seed),
                c.iters);
    const std::vector<double> ev = LowestEigenvalues(s.alpha, s.beta, c.iters, c.nev);
    for (size_t i = 0; i < ev.size(); ++i) std::printf("eig[%zu] = %.17g\n", i, ev[i]);
    std::fflush(stdout);
    if (!c.quiet) std::fprintf(stderr, "lanczos: %.3f s in the iteration loop\n", res.seconds);
  }
  return res;
}

}  // namespace lanczos
