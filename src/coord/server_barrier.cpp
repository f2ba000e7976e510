// The coordinator's barriers (LAM/MPI's checkpoint phases, DMTCP's global barriers):
//   checkpoint: suspend -> drain -> write -> (MANIFEST.json) -> resume
//   --fork:     suspend -> drain -> write -> resume -> durable -> (MANIFEST.json): processes answer write
//               as soon as their copy-on-write writer exists and go on; durable brings the images
//               (each process answers it when its writer has exited), and only then is the manifest
//               written, so a generation is published only when every image is durable.
//   restart:    (all processes of the manifest back) -> reconnect -> refill -> resume
// Every participant must answer PHASE with PHASE_DONE before the next phase starts. A failure or a
// disconnect marks the generation failed; the current phase still completes for the survivors (they cannot
// take a new phase mid-way), then everybody is resumed with ok=0 and no manifest is written.
// A generation that failed only for transient reasons is taken again, under the same number, after a short
// back-off (up to kMaxRetries times) before the requesters hear anything: a shell script or make runs a
// new program every few milliseconds, and a checkpoint that lands on an exit, an exec or a fork must not
// fail the user's `revive checkpoint` or an interval checkpoint. Transient: a process that leaves the
// computation (exits, or its exec replaces the connection) before it answered suspend, and a process
// whose plugins refused for now (retry=1: a fork in flight, whose child has not joined yet).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "coord/dead_ranks.h"
#include "coord/log.h"
#include "coord/server.h"
#include "coord/server_conn.h"
#include "core/env.h"

namespace revive::coord {
namespace {

const char* const kCkptPhases[] = {"suspend", "drain", "write", "resume", "durable"};
constexpr size_t kResumeIndex = 3;
const char* const kRestartPhases[] = {"reconnect", "refill", "resume"};
constexpr unsigned kMaxRetries = 12;

// The images a failed attempt left (the retry writes them again; a process that left would leave one).
void RemoveFilesIn(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = readdir(d))
    if (e->d_name[0] != '.' || (e->d_name[1] != '\0' && (e->d_name[1] != '.' || e->d_name[2] != '\0')))
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
}

std::string Basename(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

std::string Server::StateName() const {
  switch (state_) {
    case State::kIdle: return "idle";
    case State::kCheckpoint: return "checkpoint:" + phase_;
    case State::kRestartWait:
      return "restart:waiting for " + std::to_string(restart_expected_.size()) + " processes";
    case State::kRestart: return "restart:" + phase_;
  }
  return "?";
}

void Server::RequestCheckpoint(Conn* requester, uint32_t seq) {
  // busy: not a failure of the computation, only "not now" (a restart is in progress, no process has
  // connected yet): `revive checkpoint` exits 75 and the checkpoint-signal handler asks again.
  auto reply_now = [&](const std::string& error, bool busy = false, bool silent = false) {
    if (requester == nullptr) {
      Log(1, "interval checkpoint skipped: %s", error.c_str());
      return;
    }
    uint8_t buf[1024];
    FrameBuilder b(buf, sizeof buf, kCkptDone, seq);
    b.add("ok", "0").add_u64("generation", 0).add("error", error.substr(0, 900).c_str());
    if (busy) b.add("busy", "1");
    if (silent) b.add("silent", "1");  // a process was dropped for not answering: `revive run` sees a hang
    Send(requester, b);
  };
  // Join the generation in progress, or queue behind a running restart barrier (it ends on its own,
  // unlike the wait for restored processes, which may never all come).
  if (state_ == State::kCheckpoint || state_ == State::kRestart || retry_pending_) {
    if (requester != nullptr) requesters_.emplace_back(requester->id, seq);
    return;
  }
  if (state_ != State::kIdle) return reply_now("a restart is in progress (" + StateName() + ")", true);
  // The refusal first: a computation whose only process was dropped alive still has that process.
  if (std::string refusal = CheckpointRefusal(); !refusal.empty()) return reply_now(refusal, false, !lost_live_.empty());
  if (ProcCount() == 0) return reply_now("no processes are connected to the coordinator", true);

  cur_gen_ = ++max_gen_seen_;
  std::string dir = GenerationDir(o_.ckpt_dir, cur_gen_);
  Status s = CreateDirs(Env::Default(), dir);
  if (!s.ok()) return reply_now("cannot create " + dir + ": " + s.message());

  if (requester != nullptr) requesters_.emplace_back(requester->id, seq);
  ckpt_started_ = MonotonicSeconds();
  attempt_ = 0;
  BeginGeneration();
}

// One attempt at cur_gen_, with the processes connected now.
void Server::BeginGeneration() {
  state_ = State::kCheckpoint;
  failed_ = false;
  retryable_ = false;
  fail_reason_.clear();
  silent_ = false;
  manifest_ = Manifest();
  manifest_.generation = cur_gen_;
  participants_.clear();
  early_durable_.clear();
  departed_.clear();
  for (const auto& [id, c] : conns_)
    if (!c->dead && c->HasMembers(/*awaiting=*/false)) participants_.insert(id);
  phase_index_ = 0;
  Log(2, "checkpoint generation %llu of %zu processes%s", (unsigned long long)cur_gen_, participants_.size(),
      attempt_ ? (", attempt " + std::to_string(attempt_ + 1)).c_str() : "");
  TLevelsBegin();
  if (participants_.empty()) {  // everybody left while a retry waited
    FailGeneration("no processes are connected to the coordinator");
    FinishCheckpoint();
    return;
  }
  if (std::string refusal = CheckpointRefusal(); !refusal.empty()) {  // lost one while a retry waited
    FailGeneration(refusal);
    FinishCheckpoint();
    return;
  }
  StartPhase(kCkptPhases[0]);
}

void Server::StartPhase(const char* name) {
  phase_ = name;
  phase_started_ = MonotonicSeconds();
  waiting_ = participants_;
  // Those that reported their image early (they are exiting) are not asked again.
  if (state_ == State::kCheckpoint && phase_ == "durable")
    for (uint64_t id : early_durable_) waiting_.erase(id);
  const std::vector<uint64_t> targets(participants_.begin(), participants_.end());
  for (uint64_t id : targets) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->dead || waiting_.count(id) == 0) continue;
    SendPhase(it->second.get());
  }
  AdvanceIfBarrierComplete();
}

// The current phase's PHASE frame to one participant.
void Server::SendPhase(Conn* c) {
  std::string dir = GenerationDir(o_.ckpt_dir, state_ == State::kCheckpoint ? cur_gen_ : generation_);
  uint8_t buf[4096 + 256];
  FrameBuilder b(buf, sizeof buf, kPhase, 0);
  b.add("name", phase_.c_str()).add_u64("generation", state_ == State::kCheckpoint ? cur_gen_ : generation_);
  TLevelsPhaseFields(c, &b, &dir);  // with levels: a sub's processes write to their host's directory
  b.add("dir", dir.c_str());
  if (phase_ == "resume") b.add("ok", failed_ ? "0" : "1");  // plugins' resume(ok)
  // Which of a sub-coordinator's processes take part: the running ones or the restored ones.
  b.add("barrier", state_ == State::kCheckpoint ? "checkpoint" : "restart");
  Send(c, b);
}

void Server::OnPhaseDone(Conn* c, const Payload& p) {
  char name[32] = "";
  p.get_str("name", name, sizeof name);
  if (EarlyDurable(c, p)) return;
  if ((state_ != State::kCheckpoint && state_ != State::kRestart) || phase_ != name ||
      waiting_.count(c->id) == 0) {
    // Late answer from a process already timed out of this phase, or a confused client: not fatal.
    Log(1, "%s: ignoring PHASE_DONE %s (coordinator is %s)", c->Describe().c_str(), name, StateName().c_str());
    return;
  }
  std::string why;
  if (!PhaseDoneOk(p, c->Describe(), phase_, &why)) {
    FailGeneration(why, state_ == State::kCheckpoint && PhaseDoneRetryable(p));
    if (PhaseDoneSilent(p)) silent_ = true;
  } else if (state_ == State::kCheckpoint && phase_ == ImagePhase()) {
    AddImages(c, p);
  }
  bool restart = state_ == State::kRestart;
  for (auto& [u, m] : c->members)
    if (m.awaiting_restart == restart) m.state = phase_;
  waiting_.erase(c->id);
  AdvanceIfBarrierComplete();
}

// --fork: a process that exits after it resumed waits for its writer and reports the image at once
// (early=1), before or during phase durable (a sub-coordinator keeps such reports for its own durable answer).
// The report counts as its answer to durable, and its exit fails nothing. Returns false if p is not one.
bool Server::EarlyDurable(Conn* c, const Payload& p) {
  uint64_t early = 0, gen = 0;
  if (!p.get_u64("early", &early) || early != 1) return false;
  char name[32] = "";
  p.get_str("name", name, sizeof name);
  p.get_u64("generation", &gen);
  const bool after_write = phase_ == "resume" || phase_ == "durable";
  if (state_ != State::kCheckpoint || !o_.fork || std::string(name) != "durable" || gen != cur_gen_ ||
      !after_write || participants_.count(c->id) == 0 || early_durable_.count(c->id) != 0) {
    Log(1, "%s: ignoring an early PHASE_DONE %s of generation %llu (coordinator is %s)", c->Describe().c_str(),
        name, (unsigned long long)gen, StateName().c_str());
    return true;
  }
  std::string why;
  if (!PhaseDoneOk(p, c->Describe(), "durable", &why)) FailGeneration(why);
  else AddImages(c, p);
  early_durable_.insert(c->id);
  if (phase_ == "durable" && waiting_.erase(c->id) > 0) AdvanceIfBarrierComplete();
  return true;
}

// PHASE_DONE write: a process reports its image; a sub-coordinator reports n of them as p.<i>.upid/image/
// bytes. Each image must exist in the generation directory.
void Server::AddImages(Conn* c, const Payload& p) {
  std::string gen_dir = GenerationDir(o_.ckpt_dir, cur_gen_);
  auto add = [&](const Member& m, const std::string& image, uint64_t bytes, const std::string& pre) {
    std::string file = Basename(image);
    ManifestProc lp;
    lp.upid = m.upid;
    if (!file.empty() && TLevelsAddImage(c, p, pre, &lp)) {
      lp.pid = m.pid;
      lp.host = m.host;
      lp.prog = m.prog;
      lp.image = file;
      lp.bytes = bytes;
      manifest_.procs.push_back(lp);
      return;
    }
    struct stat st;
    if (file.empty() || stat((gen_dir + "/" + file).c_str(), &st) != 0) {
      FailGeneration(m.Describe() + " reported image \"" + image + "\", not found in " + gen_dir);
      return;
    }
    ManifestProc mp;
    mp.upid = m.upid;
    mp.pid = m.pid;
    mp.host = m.host;
    mp.prog = m.prog;
    mp.image = file;
    mp.bytes = bytes != 0 ? bytes : (uint64_t)st.st_size;
    manifest_.procs.push_back(mp);
  };
  char image[4096] = "";
  uint64_t bytes = 0;
  if (c->role == Conn::Role::kProc) {
    p.get_str("image", image, sizeof image);
    p.get_u64("bytes", &bytes);
    add(*c->Self(), image, bytes, "");
    return;
  }
  uint64_t n = 0;
  p.get_u64("n", &n);
  for (uint64_t i = 0; i < n; i++) {
    std::string pre = "p." + std::to_string(i) + ".";
    uint64_t upid = 0;
    bytes = 0;
    image[0] = '\0';
    p.get_u64((pre + "upid").c_str(), &upid);
    p.get_str((pre + "image").c_str(), image, sizeof image);
    p.get_u64((pre + "bytes").c_str(), &bytes);
    auto it = c->members.find(upid);
    if (it != c->members.end()) {
      add(it->second, image, bytes, pre);
    } else if (auto d = departed_.find(upid); d != departed_.end()) {
      add(*d->second, image, bytes, pre);
    } else {
      FailGeneration(c->Describe() + " reported an image for unknown upid " + std::to_string(upid));
    }
  }
}

// The first failure decides whether the attempt is taken again: later ones are mostly its consequences
// (peers whose lookups it aborted below). Plugins of the other participants waiting in a LOOKUP for what
// the failed process will never publish are answered "not found" now, not after their 60 s timeouts.
void Server::FailGeneration(const std::string& why, bool transient) {
  Log(transient ? 2 : 1, "generation %llu failed: %s", (unsigned long long)cur_gen_, why.c_str());
  if (!failed_) {
    fail_reason_ = why;
    retryable_ = transient;
  }
  failed_ = true;
  if (state_ == State::kCheckpoint) AbortLookups(participants_);
}

void Server::OnPeerGone(Conn* c, const std::string& why) {
  if (state_ == State::kRestartWait)
    for (const auto& [u, m] : c->members)
      if (m.awaiting_restart) restart_expected_.insert(u);
  if (c->timed_out)  // alive as far as we know, but no longer ours (see lost_live_)
    for (const auto& [u, m] : c->members) NoteLostLive(m, why);
  bool dead_rank = false;
  if (DeadRank(*c)) {
    NoteDeadRank(*c->Self());
    dead_rank = true;
  }
  if (participants_.erase(c->id) == 0) return;
  bool was_waiting = waiting_.erase(c->id) > 0;
  // Gone before it was suspended: if it exited (or its exec replaced it) the generation simply goes on
  // without it (its parent records it as an exited child); if it still runs, the attempt is taken again.
  // Gone while suspended (drain, write): it was killed. --fork: gone after it resumed but before its
  // image was reported (it exited in a way the engine does not see, _exit or a signal): transient too.
  const bool early = early_durable_.erase(c->id) > 0;
  if (state_ == State::kCheckpoint && !early) {
    const bool resumed = phase_ == "resume" || phase_ == "durable";
    if (dead_rank && phase_ == kCkptPhases[0])  // not without it: its job is ending (later: failed anyway)
      FailGeneration(CheckpointRefusal());
    else if (phase_ == kCkptPhases[0] && was_waiting && (c->said_bye || LeftOnItsOwn(*c)))
      Log(2, "%s left before it was suspended; generation %llu goes on without it", c->Describe().c_str(),
          (unsigned long long)cur_gen_);
    else if (phase_ == kCkptPhases[0])
      // Lost before it was suspended while it still runs: taken again without it, unless it was timed out
      // (it is there but does not answer: a generation without it would miss a live process).
      FailGeneration(c->Describe() + " " + why + " during phase " + phase_, was_waiting && !c->timed_out);
    else if (!resumed || (o_.fork && (phase_ == "resume" || was_waiting)))
      FailGeneration(c->Describe() + " " + why + " during phase " + phase_ + " before its image was durable",
                     resumed);
  }
  if (was_waiting) AdvanceIfBarrierComplete();
}

void Server::AdvanceIfBarrierComplete() {
  if (!waiting_.empty()) return;
  if (state_ == State::kRestart) {
    if (phase_ == "resume") {
      for (uint64_t id : participants_) {
        auto it = conns_.find(id);
        if (it == conns_.end()) continue;
        for (auto& [u, m] : it->second->members) {
          if (m.awaiting_restart) m.state = "running";
          m.awaiting_restart = false;
        }
      }
      Log(2, "restart of generation %llu complete", (unsigned long long)generation_);
      participants_.clear();
      state_ = State::kIdle;
      next_interval_ = MonotonicSeconds() + o_.interval;
      auto queued = std::move(requesters_);  // checkpoints requested during the restart barrier
      requesters_.clear();
      for (auto [id, seq] : queued) {
        auto it = conns_.find(id);
        if (it != conns_.end() && !it->second->dead) RequestCheckpoint(it->second.get(), seq);
      }
      return;
    }
    phase_index_++;
    StartPhase(kRestartPhases[phase_index_]);
    return;
  }
  if (state_ != State::kCheckpoint) return;
  if (!failed_ && phase_ == ImagePhase()) {
    if (manifest_.procs.empty()) {
      FailGeneration("no process wrote an image");
    } else {
      std::sort(manifest_.procs.begin(), manifest_.procs.end(),
                [](const ManifestProc& a, const ManifestProc& b) { return a.upid < b.upid; });
      manifest_.time = WallSeconds();
      Status s = WriteManifest(Env::Default(), GenerationDir(o_.ckpt_dir, cur_gen_), manifest_);
      if (!s.ok()) FailGeneration("writing MANIFEST.json: " + s.ToString());
    }
  }
  if (phase_index_ + 1 == (o_.fork ? 5u : 4u)) {
    FinishCheckpoint();
    return;
  }
  phase_index_ = failed_ && phase_index_ < kResumeIndex ? kResumeIndex : phase_index_ + 1;
  StartPhase(kCkptPhases[phase_index_]);
}

const char* Server::ImagePhase() const { return o_.fork ? "durable" : "write"; }

void Server::FinishCheckpoint() {
  double secs = MonotonicSeconds() - ckpt_started_;
  state_ = State::kIdle;
  participants_.clear();
  // Keys published under "gen.<G>." belong to one attempt of generation G (docs/protocol.md): a retry
  // publishes them again, and a long computation must not grow the table by a generation's worth each time.
  const std::string scoped = "gen." + std::to_string(cur_gen_) + ".";
  for (auto it = kv_.lower_bound(scoped); it != kv_.end() && it->first.compare(0, scoped.size(), scoped) == 0;)
    it = kv_.erase(it);
  std::string dir = GenerationDir(o_.ckpt_dir, cur_gen_);
  if (failed_ && retryable_ && attempt_ < kMaxRetries && ProcCount() > 0) {
    ++attempt_;
    const double delay = std::min(0.005 * double(1u << std::min(attempt_, 6u)), 0.25);
    Log(2, "generation %llu: %s; taking it again in %.0f ms (retry %u of %u)", (unsigned long long)cur_gen_,
        fail_reason_.c_str(), delay * 1000, attempt_, kMaxRetries);
    RemoveFilesIn(dir);
    retry_pending_ = true;
    retry_at_ = MonotonicSeconds() + delay;
    StartPendingRestart();
    return;
  }
  if (failed_ && retryable_ && attempt_ > 0)
    fail_reason_ += " (the generation was taken " + std::to_string(attempt_ + 1) + " times)";
  uint64_t bytes = 0;
  for (const auto& p : manifest_.procs) bytes += p.bytes;
  if (!failed_) generation_ = cur_gen_;
  if (!failed_) TLevelsResumedHere();
  if (!failed_ && o_.fork) TLevelsPublished();
  Log(failed_ ? 1 : 2, "generation %llu %s in %.3f s", (unsigned long long)cur_gen_,
      failed_ ? "failed" : "complete", secs);
  uint8_t buf[8192];
  for (auto [id, seq] : requesters_) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->dead) continue;
    char s[32];
    snprintf(s, sizeof s, "%.6f", secs);
    FrameBuilder b(buf, sizeof buf, kCkptDone, seq);
    b.add("ok", failed_ ? "0" : "1").add_u64("generation", cur_gen_).add("dir", dir.c_str())
        .add_u64("images", failed_ ? 0 : manifest_.procs.size()).add_u64("bytes", failed_ ? 0 : bytes)
        .add("seconds", s).add("error", fail_reason_.substr(0, 2000).c_str())
        .add("silent", silent_ ? "1" : "0");
    Send(it->second.get(), b);
  }
  requesters_.clear();
  next_interval_ = MonotonicSeconds() + o_.interval;
  StartPendingRestart();
}

// Processes restored while we were busy get their restart barrier now.
void Server::StartPendingRestart() {
  for (const auto& [id, c] : conns_)
    for (const auto& [u, m] : c->members)
      if (!c->dead && m.awaiting_restart) {
        OnRestartHello(u);
        return;
      }
}

Status Server::LoadRestartManifest(Manifest* m) {
  std::string path = o_.restart_manifest;
  if (path.empty()) {
    uint64_t g = 0;
    Status s = FindNewestGeneration(Env::Default(), o_.ckpt_dir, &g, nullptr);
    if (!s.ok()) return s;
    path = GenerationDir(o_.ckpt_dir, g) + "/MANIFEST.json";
  }
  return ReadManifest(Env::Default(), path, m);
}

void Server::OnRestartHello(uint64_t upid) {
  if (state_ == State::kCheckpoint || state_ == State::kRestart) return;  // FinishCheckpoint comes back
  if (state_ == State::kIdle) {
    restart_expected_.clear();
    Manifest m;
    Status s = LoadRestartManifest(&m);
    bool listed = false;
    if (s.ok()) {
      for (const auto& p : m.procs) listed |= p.upid == upid;
      if (listed) {
        for (const auto& p : m.procs) restart_expected_.insert(p.upid);
        generation_ = m.generation;
      }
    }
    // A process not in the manifest (e.g. one image restored on its own) restarts alone.
    if (!listed) restart_expected_.insert(upid);
    // Those already back (restored before this one) count too.
    for (const auto& [id, pc] : conns_)
      for (const auto& [u, mem] : pc->members)
        if (!pc->dead && mem.awaiting_restart) restart_expected_.erase(u);
    state_ = State::kRestartWait;
  }
  restart_expected_.erase(upid);
  Log(2, "process upid %llu is back; %zu more expected", (unsigned long long)upid, restart_expected_.size());
  if (!restart_expected_.empty()) return;
  state_ = State::kRestart;
  participants_.clear();
  for (const auto& [id, pc] : conns_)
    if (!pc->dead && pc->HasMembers(/*awaiting=*/true)) participants_.insert(id);
  phase_index_ = 0;
  StartPhase(kRestartPhases[0]);
}

// A sub-coordinator times out its own processes after the phase timeout and reports which one was silent;
// the root gives it this much longer before it drops the sub itself (and with it every process there).
static double SubSlack(double phase_timeout) { return std::max(1.0, 0.1 * phase_timeout); }

void Server::TimeOut(Conn* c, const std::string& phase) {
  char t[32];
  snprintf(t, sizeof t, "%.0f", o_.phase_timeout);
  std::string why = "did not answer phase " + phase + " within " + t + " s";
  silent_ = true;  // told to `revive run` (by a sub: to the root), which takes a silent process for a hung one
  c->timed_out = true;
  SendError(c, 0, why);
  Drop(c, why);
}

void Server::NoteLostLive(const Member& m, const std::string& why) {
  const std::string who = m.Describe();
  if (lost_live_.empty()) lost_live_why_ = why;
  lost_live_.push_back(who);
  lost_live_procs_.push_back(m);
  Log(1, "%s was dropped after it %s: later checkpoints of this computation will be refused", who.c_str(),
      why.c_str());
}

void Server::NoteDeadRank(const Member& m) {
  std::string who = "MPI rank " + m.mpi_rank + ", " + m.Describe() + ",";
  dead_ranks_.push_back(who);
  // Also on disk, for `revive run` (dead_ranks.h).
  if (FILE* f = fopen((o_.ckpt_dir + "/" + kDeadRanksFile).c_str(), "a")) {
    fprintf(f, "%s\n", who.c_str());
    fclose(f);
  }
  Log(1, "%s ended without exit() (killed or crashed): its job is ending; later checkpoints of it will be "
      "refused", who.c_str());
}

std::string Server::CheckpointRefusal() const {
  if (lost_live_.empty() && !dead_ranks_.empty())
    return "checkpoints of this job are refused: " + dead_ranks_.front() +
           (dead_ranks_.size() > 1 ? " (and " + std::to_string(dead_ranks_.size() - 1) + " more ranks)" : "") +
           " ended without exit() (killed or crashed), so its job is ending; a checkpoint now would save a job "
           "that cannot finish. Restart from the last complete generation.";
  if (lost_live_.empty()) return "";
  return "checkpoints of this computation are refused: " + lost_live_.front() +
         (lost_live_.size() > 1 ? " (and " + std::to_string(lost_live_.size() - 1) + " more)" : "") +
         " was dropped because it " + lost_live_why_ +
         "; it may still run without a coordinator, so a checkpoint now would not hold the whole computation. "
         "Restart from the last complete generation, or end the computation.";
}

void Server::CheckTimers() {
  double now = MonotonicSeconds();
  if (state_ == State::kCheckpoint || state_ == State::kRestart) {
    std::vector<Conn*> silent;
    for (uint64_t id : waiting_) {
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second->dead) continue;
      double limit = o_.phase_timeout + (it->second->role == Conn::Role::kSub ? SubSlack(o_.phase_timeout) : 0);
      if (now - phase_started_ > limit) silent.push_back(it->second.get());
    }
    for (Conn* c : silent) TimeOut(c, phase_);
  }
  if (up_ && up_->in_phase && now - up_->phase_started > o_.phase_timeout) {  // a sub: our processes
    std::vector<Conn*> silent;
    for (uint64_t id : up_->waiting) {
      auto it = conns_.find(id);
      if (it != conns_.end() && !it->second->dead) silent.push_back(it->second.get());
    }
    for (Conn* c : silent) TimeOut(c, up_->phase);
  }
  if (retry_pending_ && state_ == State::kIdle && now >= retry_at_) {
    retry_pending_ = false;
    BeginGeneration();
  }
  if (o_.interval > 0 && state_ == State::kIdle && !retry_pending_ && now >= next_interval_) {
    next_interval_ = now + o_.interval;
    if (ProcCount() > 0) RequestCheckpoint(nullptr, 0);
  }
  // Unauthenticated peers and half-sent frames may not hold resources forever. O(connections): twice a
  // second at most, not once per event.
  if (now - last_sweep_ < 0.5) return;
  last_sweep_ = now;
  for (auto& [id, c] : conns_) {
    if (c->dead) continue;
    if (c->role == Conn::Role::kUnauth && now - c->since > kAuthTimeoutSeconds) Drop(c.get(), "no HELLO in time");
    else if (!c->in.empty() && now - c->since > kPartialFrameTimeoutSeconds) Drop(c.get(), "truncated frame");
  }
}

int Server::NextTimeoutMs() const {
  double now = MonotonicSeconds();
  double next = now + 1.0;  // housekeeping (timeouts) at least every second
  if (o_.interval > 0 && state_ == State::kIdle) next = std::min(next, next_interval_);
  if (retry_pending_ && state_ == State::kIdle) next = std::min(next, retry_at_);
  if (state_ == State::kCheckpoint || state_ == State::kRestart) {
    // The processes' deadline, then (once it passed: only sub-coordinators can still be waited for) theirs.
    double procs = phase_started_ + o_.phase_timeout;
    next = std::min(next, now < procs ? procs : procs + SubSlack(o_.phase_timeout));
  }
  if (up_ && up_->in_phase) next = std::min(next, up_->phase_started + o_.phase_timeout);
  double ms = (next - now) * 1000;
  return ms <= 0 ? 0 : (int)ms + 1;
}

}  // namespace revive::coord
