#include "config.h"

#include <CLI/CLI.hpp>

namespace lanczos {

bool ParseArgs(int argc, char** argv, const char* what, Config* c, int* exit_code) {
  CLI::App app{what};
  // Scripts append overrides to a base command line: the last occurrence of an option wins.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--nx", c->nx, "lattice width")->check(CLI::PositiveNumber);
  app.add_option("--ny", c->ny, "lattice height")->check(CLI::PositiveNumber);
  app.add_option("--iters", c->iters, "Lanczos iterations")->check(CLI::PositiveNumber);
  app.add_option("--every", c->every, "checkpoint every k iterations (0 = never)")->check(CLI::NonNegativeNumber);
  app.add_option("--async", c->async, "asynchronous writes: off, copy, zero")
      ->check(CLI::IsMember({"off", "copy", "zero"}));
  app.add_option("--nev", c->nev, "eigenvalues printed")->check(CLI::PositiveNumber);
  app.add_option("--disorder", c->disorder, "width of the on-site energy distribution");
  app.add_option("--seed", c->seed, "seed of the on-site energies");
  app.add_option("--name", c->name, "checkpoint name");
  app.add_option("--dir", c->dir, "checkpoint base directory (default: REVIVE_CP_PATH)");
  app.add_flag("--fresh", c->fresh, "ignore existing checkpoints");
  app.add_flag("--quiet", c->quiet, "no progress messages on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return false;
  }
  return true;
}

revive::Options CheckpointOptions(const Config& c) {
  revive::Options o = revive::Options::from_env();
  if (!c.dir.empty()) o.base_path = c.dir;
  if (c.fresh) o.read_on_restart = false;
  o.async = c.async != "off";
  o.zero_copy = c.async == "zero";
  return o;
}

}  // namespace lanczos
