// Command line of the Lanczos example, shared by the serial and the MPI binary and by the benchmark.
#ifndef REVIVE_EXAMPLES_LANCZOS_CONFIG_H_
#define REVIVE_EXAMPLES_LANCZOS_CONFIG_H_

#include <cstdint>
#include <string>

#include "revive/checkpoint.hpp"

namespace lanczos {

struct Config {
  int nx = 400, ny = 400;        // lattice; matrix dimension nx*ny
  int iters = 300;               // fixed Lanczos iteration count
  int every = 10;                // checkpoint frequency in iterations (0 = never)
  std::string async = "off";     // off | copy | zero
  int nev = 6;                   // lowest eigenvalues printed
  double disorder = 1.0;
  uint64_t seed = 1;
  std::string name = "lanczos";  // checkpoint name
  std::string dir;               // checkpoint base path ("" = REVIVE_CP_PATH or the library default)
  bool fresh = false;            // ignore existing checkpoints
  bool quiet = false;            // no progress on stderr
};

// Parses argv; on --help or a bad option prints the message and returns false with *exit_code set.
bool ParseArgs(int argc, char** argv, const char* what, Config* c, int* exit_code);
// Library options for this configuration (environment first, then the command line overrides).
revive::Options CheckpointOptions(const Config& c);

}  // namespace lanczos

#endif
