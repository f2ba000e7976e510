// One function per `revive` subcommand: registers it (options, help) on the app; its callback stores the
// process exit status in *rc.
#pragma once

#include <CLI/CLI.hpp>

namespace revive::cli {

void AddCoordinatorCommand(CLI::App& app, int* rc);
void AddLaunchCommand(CLI::App& app, int* rc);
void AddCheckpointCommand(CLI::App& app, int* rc);
void AddStatusCommand(CLI::App& app, int* rc);
void AddKillCommand(CLI::App& app, int* rc);
void AddRestartCommand(CLI::App& app, int* rc);
void AddInspectCommand(CLI::App& app, int* rc);
// Multi-level checkpoint tools (docs/storage-levels.md).
void AddLsCommand(CLI::App& app, int* rc);
void AddVerifyCommand(CLI::App& app, int* rc);
void AddRebuildCommand(CLI::App& app, int* rc);
void AddFlushCommand(CLI::App& app, int* rc);
// Catastrophic-failure probability and checkpoint interval (core/resilience.h).
void AddRiskCommand(CLI::App& app, int* rc);
// Supervisor: relaunch a failed job from its newest checkpoint (cmd_run.cpp, docs/run.md).
void AddRunCommand(CLI::App& app, int* rc);
// Internal helpers of `revive restart --hosts` for node-local transparent images (cmd_tlevels.cpp).
void AddTLevelsCommands(CLI::App& app, int* rc);

}  // namespace revive::cli
