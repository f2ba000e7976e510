// What several `revive` commands share: where the coordinator and the checkpoint directory are, talking
// to the coordinator as a CLI peer, and starting one when none answers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coord/client.h"
#include "core/status.h"

namespace revive::cli {

constexpr uint16_t kDefaultPort = 7779;

struct Target {
  std::string host;         // REVIVE_COORD_HOST or 127.0.0.1
  uint16_t port = 0;        // --port, REVIVE_PORT, 7779
  bool port_explicit = false;  // from --port or REVIVE_PORT (else the default, which may be moved)
  std::string ckpt_dir;     // absolute: --ckpt-dir, REVIVE_CKPT_DIR, ./revive-ckpt
  std::string secret_file;  // REVIVE_SECRET_FILE or <ckpt_dir>/.revive-secret
};

// port_opt/dir_opt: the command-line values ("" when not given). Errors name the variable or option.
// The checkpoint directory when none is given: REVIVE_CKPT_DIR, else "revive-ckpt" (relative).
std::string DefaultCkptDir();
Status ResolveTarget(const std::string& port_opt, const std::string& dir_opt, Target* t);

// No port given (--port, REVIVE_PORT): the port of the live coordinator that serves t->ckpt_dir on this
// host (its record, launch/coord_record.h), so commands and further launches find a computation that
// had to move off the default port. Unchanged when there is none.
void PreferRecordedPort(Target* t);

// No port given, and the default port is held by a coordinator of another computation (another user's,
// another checkpoint directory: its secret is not ours): moves t to a free port and says so on stderr
// (`who` names the command). Two computations on one node then need no --port. The secret file must
// exist. An explicit port is never moved: connecting to it reports the foreign coordinator as before.
Status AvoidForeignPort(Target* t, const char* who);

// An exclusive flock on <ckpt_dir>/.revive-launch.lock while it lives (or until Release): launches and
// restarts of one directory that choose their coordinator's port (none given) do so one at a time.
// ckpt_dir "": no lock. Only such choosers take it: a host's part (--parent, its port given) must never
// wait on another part, or a part that fails first could leave the next one starting after the restart
// was already stopped (hosts.tree_rotate hung so). Best effort: without the lock file (read-only
// directory) nothing is serialised, as before.
class LaunchLock {
 public:
  explicit LaunchLock(const std::string& ckpt_dir);
  ~LaunchLock() { Release(); }
  void Release();
  LaunchLock(const LaunchLock&) = delete;
  LaunchLock& operator=(const LaunchLock&) = delete;

 private:
  int fd_ = -1;
};

// Connects as role=cli. The message says which coordinator and why (not running, wrong secret...);
// NotFound when nothing listens on the port.
Status ConnectCli(const Target& t, int connect_timeout_ms, coord::Client* c);

// `revive checkpoint`'s exit status for "not now, ask again" (EX_TEMPFAIL): no coordinator listens yet,
// a restart is in progress, or no process has connected yet. The checkpoint-signal handler retries on it.
constexpr int kCheckpointNotNow = 75;

// Is anything accepting TCP connections at host:port? (no protocol, no retries)
bool Listening(const Target& t);

// Starts `revive coordinator --daemon --exit-on-last` for t unless something listens on the port; then
// checks that we can authenticate (a coordinator of another computation on that port is an error).
Status EnsureCoordinator(const Target& t, const std::vector<std::string>& extra_args);

// Everything readable from fd until EOF (pipes from helper processes).
std::string ReadAll(int fd);

// Progress/info lines on stderr, only when it is a terminal.
void Progress(const std::string& line);

// A coord::Client closed on scope exit (Client itself is trivially destructible by design).
struct ScopedClient {
  coord::Client c;
  ~ScopedClient() { c.close(); }
};

}  // namespace revive::cli
