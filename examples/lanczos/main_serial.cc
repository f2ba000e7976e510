// Serial Lanczos example: `lanczos --nx 400 --ny 400 --iters 300 --every 10 [--async copy]`.
#include <cstdio>

#include "config.h"
#include "run.h"

int main(int argc, char** argv) {
  lanczos::Config c;
  int code = 0;
  if (!lanczos::ParseArgs(argc, argv, "Lanczos eigensolver with application-level checkpoints", &c, &code))
    return code;
  try {
    const lanczos::Lattice L = lanczos::Lattice::Block(c.nx, c.ny, 0, 1, c.disorder, c.seed);
    revive::Checkpoint cp(c.name, lanczos::CheckpointOptions(c));
    lanczos::Run(c, L, lanczos::Parallel{}, cp, true);
  } catch (const revive::Error& e) {
    std::fprintf(stderr, "lanczos: %s\n", e.what());
    return 1;
  }
  return 0;
}
