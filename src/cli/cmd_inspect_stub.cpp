// `revive inspect` when this build has no image reader (src/image absent).
#include <stdio.h>

#include <memory>

#include "cli/commands.h"

namespace revive::cli {

void AddInspectCommand(CLI::App& app, int* rc) {
  auto image = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand("inspect", "Describe an image (not available: built without src/image)");
  c->add_flag("--json", "Machine-readable output");
  c->add_option("image", *image, "IMAGE.rimg")->required();
  c->callback([rc] {
    fprintf(stderr, "revive inspect: this revive was built without the image reader (src/image)\n");
    *rc = 2;
  });
}

}  // namespace revive::cli
