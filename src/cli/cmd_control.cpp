// Commands that talk to a running coordinator: checkpoint, status, kill.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "coord/secret.h"
#include "launch/coord_record.h"
#include "launch/user_record.h"

namespace revive::cli {
namespace {

struct ControlArgs {
  std::string port, ckpt_dir;
};

std::string Str(const coord::Payload& p, const char* key) {
  const char* v;
  size_t n;
  return p.get(key, &v, &n) ? std::string(v, n) : std::string();
}

// Without --ckpt-dir or REVIVE_CKPT_DIR, the checkpoint directory (and so the secret) comes from this
// user's own record of the computation on that port (launch/user_record.h), else ./revive-ckpt as
// before; *note then says why no record was used, for the error message if connecting fails.
Status ResolveControlTarget(const ControlArgs& a, Target* t, std::string* note) {
  Status s = ResolveTarget(a.port, a.ckpt_dir, t);
  const char* e = getenv("REVIVE_CKPT_DIR");
  if (s.ok() && (!a.ckpt_dir.empty() || (e != nullptr && *e) || !t->port_explicit)) PreferRecordedPort(t);
  if (!s.ok() || !a.ckpt_dir.empty() || (e != nullptr && *e)) return s;
  std::string why;
  std::string dir = launch::LookupUserRecord(t->port, &why);
  if (!dir.empty() && access(coord::SecretPath(dir).c_str(), F_OK) != 0) {
    why = "this user's record for port " + std::to_string(t->port) + " names " + dir +
          ", which holds no computation's secret any more";
    dir.clear();
  }
  if (dir.empty()) {
    *note = "no --ckpt-dir given, and " + why;
    return s;
  }
  t->ckpt_dir = dir;
  t->secret_file = coord::SecretPath(dir);
  return s;
}

// Connects, sends one request of `type`, waits for the reply (forever when timeout_ms < 0).
Status Call(const ControlArgs& a, uint16_t type, int timeout_ms, ScopedClient* sc, coord::FrameHeader* h,
            coord::Payload* p) {
  Target t;
  std::string note;
  Status s = ResolveControlTarget(a, &t, &note);
  if (!s.ok()) return s;
  s = ConnectCli(t, 2000, &sc->c);
  if (!s.ok() && !note.empty())
    return s.IsNotFound() ? Status::NotFound(s.message() + "; " + note) : Status::IOError(s.message() + "; " + note);
  if (!s.ok()) return s;
  coord::FrameBuilder b(sc->c.tx_buffer(), coord::Client::kTxCap, type, sc->c.next_seq());
  if (!sc->c.send(b)) return Status::IOError(sc->c.error());
  int r = sc->c.recv(h, p, timeout_ms);
  if (r <= 0) return Status::IOError(r == 0 ? "no reply from the coordinator" : sc->c.error());
  if (h->type == coord::kError) return Status::IOError("coordinator: " + Str(*p, "reason"));
  return Status::OK();
}

// When nothing listens on the port but the coordinator's record is still there: its description (it died
// without shutting down, and will not come back); else "".
std::string LostCoordinator(const ControlArgs& a) {
  Target t;
  std::string note;
  if (!ResolveControlTarget(a, &t, &note).ok() || Listening(t)) return "";
  return launch::DescribeLostCoordinator(t.ckpt_dir, t.port);
}

int Checkpoint(const ControlArgs& a) {
  ScopedClient sc;
  coord::FrameHeader h;
  coord::Payload p;
  Progress("revive: checkpointing...");
  Status s = Call(a, coord::kCkptRequest, -1, &sc, &h, &p);
  if (!s.ok()) {
    fprintf(stderr, "revive checkpoint: %s\n", s.message().c_str());
    if (!s.IsNotFound()) return 2;
    // Nothing listens: not yet (ask again), unless the coordinator's record says it died.
    std::string lost = LostCoordinator(a);
    if (lost.empty()) return kCheckpointNotNow;
    fprintf(stderr, "revive checkpoint: %s\n", lost.c_str());
    return 2;
  }
  if (Str(p, "ok") != "1") {
    // Generation 0: refused before one began (no process, a restart in progress, a refusal).
    const std::string gen = Str(p, "generation");
    fprintf(stderr, "revive checkpoint: %s%s\n", gen.empty() || gen == "0" ? "" : ("generation " + gen + " failed: ").c_str(),
            Str(p, "error").c_str());
    return Str(p, "busy") == "1" ? kCheckpointNotNow : 1;
  }
  Progress("revive: generation " + Str(p, "generation") + ": " + Str(p, "images") + " images, " +
           Str(p, "bytes") + " bytes in " + Str(p, "seconds") + " s");
  printf("%s\n", Str(p, "dir").c_str());
  return 0;
}

int StatusCmd(const ControlArgs& a) {
  ScopedClient sc;
  coord::FrameHeader h;
  coord::Payload p;
  Status s = Call(a, coord::kStatusRequest, 10000, &sc, &h, &p);
  if (!s.ok()) {
    fprintf(stderr, "revive status: %s\n", s.message().c_str());
    std::string lost = LostCoordinator(a);
    if (!lost.empty()) fprintf(stderr, "revive status: %s\n", lost.c_str());
    return 2;
  }
  printf("coordinator: pid %s, checkpoint directory %s\ngeneration:  %s\nstate:       %s\nprocesses:   %s\n",
         Str(p, "coord_pid").c_str(), Str(p, "ckpt_dir").c_str(),
         Str(p, "generation").c_str(), Str(p, "state").c_str(), Str(p, "procs").c_str());
  size_t n = std::stoul("0" + Str(p, "procs"));
  if (Str(p, "truncated") == "1") {
    size_t listed = 0;
    while (p.has(("p." + std::to_string(listed) + ".upid").c_str())) listed++;
    printf("(list truncated to %zu processes)\n", listed);
    n = listed;
  }
  if (n > 0) printf("%8s %8s %-16s %-12s %s\n", "UPID", "PID", "HOST", "STATE", "PROG");
  for (size_t i = 0; i < n; i++) {
    std::string pre = "p." + std::to_string(i) + ".";
    printf("%8s %8s %-16s %-12s %s\n", Str(p, (pre + "upid").c_str()).c_str(),
           Str(p, (pre + "pid").c_str()).c_str(), Str(p, (pre + "host").c_str()).c_str(),
           Str(p, (pre + "state").c_str()).c_str(), Str(p, (pre + "prog").c_str()).c_str());
  }
  return 0;
}

int Kill(const ControlArgs& a) {
  ScopedClient sc;
  coord::FrameHeader h;
  coord::Payload p;
  Status s = Call(a, coord::kKill, 10000, &sc, &h, &p);
  if (!s.ok()) {
    fprintf(stderr, "revive kill: %s\n", s.message().c_str());
    return 2;
  }
  Progress("revive: told " + Str(p, "procs") + " processes to exit");
  return 0;
}

CLI::App* AddControl(CLI::App& app, const char* name, const char* help, std::shared_ptr<ControlArgs> a) {
  CLI::App* c = app.add_subcommand(name, help);
  c->add_option("--port", a->port, "Coordinator port (default: REVIVE_PORT, else the port recorded by the directory's running coordinator, else 7779)");
  c->add_option("--ckpt-dir", a->ckpt_dir,
                "Checkpoint directory holding the secret (default: REVIVE_CKPT_DIR or ./revive-ckpt)");
  return c;
}

}  // namespace

void AddCheckpointCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<ControlArgs>();
  CLI::App* c = AddControl(app, "checkpoint", "Checkpoint every process of the computation now", a);
  c->footer("Blocks until every image is durable and prints the generation directory. Exit 1 if the\n"
            "generation failed (the reason is printed), 2 if no coordinator answers.");
  c->callback([a, rc] { *rc = Checkpoint(*a); });
}

void AddStatusCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<ControlArgs>();
  AddControl(app, "status", "Show the coordinator's state and its processes.", a)
      ->callback([a, rc] { *rc = StatusCmd(*a); });
}

void AddKillCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<ControlArgs>();
  AddControl(app, "kill", "Tell every process of the computation to exit.", a)
      ->callback([a, rc] { *rc = Kill(*a); });
}

}  // namespace revive::cli
