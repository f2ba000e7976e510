// What `revive launch --hosts` and `revive restart --hosts` share: each host's part of the computation is
// one `revive launch`/`revive restart` run on that host through the pluggable launcher (ssh, a command
// template, `ip netns exec`), carrying its environment itself, and, with more than one host, behind a
// sub-coordinator of its own on that host (the tree of coordinators; docs/hosts.md).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "core/status.h"

namespace revive::cli {

struct HostOpts {
  std::string hosts, hostfile, launcher;
  std::string sub_port;  // first sub-coordinator's port ("" = root port + 1); host k uses it + k
};

// --hostfile, --launcher, --sub-port (each command adds its own --hosts help).
void AddHostOptions(CLI::App* c, HostOpts* o);

// --levels SPEC (REVIVE_LEVELS for this computation: images kept on the hosts, storage-levels.md).
void AddLevelsOption(CLI::App* c, std::string* levels);
// Sets REVIVE_LEVELS from --levels (when given; the root coordinator started from here reads it) and
// checks the policy in effect, so a malformed one is exit 2 before anything starts.
Status ApplyLevels(const std::string& levels);

// The launcher: --launcher, else srun for `--hosts slurm`, else ssh.
std::string LauncherOf(const HostOpts& o);

// Placement was asked for (any of --hosts, --hostfile, --launcher).
bool WantsHosts(const HostOpts& o);

// The host list (--hosts or --hostfile, slots repeated); {""} for --launcher alone (no {host}).
// `--hosts slurm`: the nodes of SLURM_JOB_NODELIST (docs/slurm.md), one entry per node.
Status ResolveHosts(const HostOpts& o, std::vector<std::string>* hosts);

// The running `revive` binary (/proc/self/exe), which host parts and `revive run` start again.
Status SelfPath(std::string* out);

// Checks the launcher template (quotes, {cmd}/{cmdq}, {host}) before anything is started.
Status CheckLauncher(const HostOpts& o, const std::string& some_host);

// One host's part: `revive ARGS...` run on `host`. With more than one part, each gets
// `--parent ROOT:PORT --port SUBPORT` (its own sub-coordinator), else `--port ROOTPORT`.
struct HostPart {
  std::string host;
  std::vector<std::string> args;  // after `revive`, before the placement options
  size_t first = 0;               // global position (manifest index, copy index) of its first process
};

// The exit status of one root process (restart) or copy (launch) at its global position: its index in
// the manifest, or its copy index. The computation's status is the first non-zero by position, the same
// whether its processes ran on one host or many.
struct RootStatus {
  size_t pos;
  int status;
};

// Expands every part through the launcher and runs them all (each told `--status-file F`, a file in the
// checkpoint directory where it reports the status of each of its roots by global position); waits for
// each and returns the first non-zero root status by position over all parts (128+N for a signal), else
// 0. A part that wrote no report (it failed before starting its processes, or its host does not share
// the checkpoint directory) counts with its own exit status at the position of its first process.
// Errors (bad template, sub port) are exit 2 with the message printed under `who`. on_fail(part,
// status), if given, is called for the first part that ends non-zero while others still run; when it
// returns true (it stopped the computation) that part's status is returned.
int RunHostParts(const char* who, const HostOpts& o, const Target& root, const std::vector<HostPart>& parts,
                 const std::function<bool(const HostPart&, int)>& on_fail = nullptr);

// For restart: when a part failed while the root still waits for processes at the restart barrier (the
// failed host's never come), tells the root to kill the computation so the other hosts' restored
// processes do not wait forever. Returns true if it did.
bool AbortUnfinishedRestart(const Target& root, const HostPart& failed, int status);

// Asks the coordinator at `root` to kill every process of its computation (as `revive kill`); with `why`,
// as a failed restart (see there). False when it cannot be reached or does not answer.
bool KillComputation(const Target& root, const std::string& why = "");

// In a part: where this host's processes connect. `parent` = "HOST:PORT" of the root (from --parent):
// a sub-coordinator is started on this host's address toward the root, port t->port, unless one answers; "" = the root itself (t unchanged),
// started with `extra` when none answers.
Status EnsurePartCoordinator(const std::string& parent, Target* t, const std::vector<std::string>& extra);

// Waits for every child; the first non-zero status in the given order (128+N for signal N), else 0.
int WaitAll(const std::vector<pid_t>& kids);

// Waits for every child; each one's status (128+N for signal N), in the given order.
std::vector<int> WaitEach(const std::vector<pid_t>& kids);

// The first non-zero status by position, else 0.
int FirstNonZero(std::vector<RootStatus> s);

// A part's report for RunHostParts: "POS STATUS" lines, written to PATH.tmp and renamed onto PATH so the
// reader never sees half of it. Errors name the file.
Status WriteStatusFile(const std::string& path, const std::vector<RootStatus>& s);

// This host's address on the route to HOST:PORT (the local address a connection there would use).
Status AddressTowards(const std::string& parent, std::string* out);

// In a child: execvp(argv); on failure prints "<what> <argv[0]>: <reason>" and _exit(127).
[[noreturn]] void ExecArgv(std::vector<std::string>& argv, const std::string& what);

// Starts `cmd` on `host` through the launcher (--launcher etc.) with its stdout on a pipe: *pid, *out_fd;
// with in_fd, its stdin on another (*in_fd writes to it).
Status StartOnHost(const HostOpts& o, const std::string& host, const std::vector<std::string>& cmd, pid_t* pid,
                   int* out_fd, int* in_fd = nullptr);

// Sets the variables a process of the computation reads to find its coordinator.
void ExportTarget(const Target& t);

}  // namespace revive::cli
