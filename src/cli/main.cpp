// revive: transparent checkpoint/restart of Linux programs. See docs/cli.md.
#include <signal.h>

#include "cli/commands.h"

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);  // a vanished coordinator is an error message, not a silent death
  CLI::App app{
      "revive: transparent checkpoint/restart of Linux programs.\n"
      "Run a program under `revive launch`, checkpoint it any time with `revive checkpoint`, and bring it\n"
      "back after a crash with `revive restart`.\n\n"
      "Environment: REVIVE_PORT (coordinator port, default 7779), REVIVE_CKPT_DIR (checkpoint directory,\n"
      "default ./revive-ckpt), REVIVE_COORD_HOST (default 127.0.0.1), REVIVE_SECRET_FILE (default\n"
      "<ckpt-dir>/.revive-secret), REVIVE_LOG (0..3), REVIVE_INJECT_LIB, REVIVE_RESTART_BIN.",
      "revive"};
  app.require_subcommand(1);
  app.fallthrough(false);
  int rc = 0;
  revive::cli::AddLaunchCommand(app, &rc);
  revive::cli::AddCheckpointCommand(app, &rc);
  revive::cli::AddRestartCommand(app, &rc);
  revive::cli::AddStatusCommand(app, &rc);
  revive::cli::AddKillCommand(app, &rc);
  revive::cli::AddInspectCommand(app, &rc);
  revive::cli::AddLsCommand(app, &rc);
  revive::cli::AddVerifyCommand(app, &rc);
  revive::cli::AddRebuildCommand(app, &rc);
  revive::cli::AddFlushCommand(app, &rc);
  revive::cli::AddRiskCommand(app, &rc);
  revive::cli::AddRunCommand(app, &rc);
  revive::cli::AddTLevelsCommands(app, &rc);
  revive::cli::AddCoordinatorCommand(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return rc;
}
