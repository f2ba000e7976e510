// The coordinator: one single-threaded epoll loop serving every process and CLI of a computation
// (DMTCP's design, which held at 16K processes at <5% of a core). It authenticates clients, runs the
// checkpoint and restart barriers, writes MANIFEST.json, and keeps the publish/subscribe table.
//
// A peer that sends a malformed, oversized or truncated frame loses its own connection only.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coord/manifest.h"
#include "coord/tlevels.h"
#include "coord/wire.h"
#include "core/status.h"

namespace revive::coord {

struct Member;

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 7779;      // 0 = any free port (tests); see Server::port()
  std::string ckpt_dir;      // absolute; created if missing
  std::string secret_file;   // empty = SecretPath(ckpt_dir)
  double interval = 0;       // seconds between automatic checkpoints; 0 = only on request
  double phase_timeout = 600;  // a process silent this long in a phase fails the generation
  bool exit_on_last = false;
  double idle_exit = 60;     // with exit_on_last: give up if no process ever connects in this time
  bool compress = false;     // told to processes in WELCOME (off by default: speed)
  bool fork = false;
  std::string restart_manifest;  // expected processes of a restart (else the newest manifest)
  std::string parent;            // "host:port" of the root: run as a sub-coordinator (server_sub.cpp)
};

class Server {
 public:
  explicit Server(ServerOptions o);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads or creates the secret, creates the ckpt dir, binds and listens.
  Status Start();
  uint16_t port() const { return port_; }
  // Serves until Stop() or, with exit_on_last, the last process leaves. Returns OK or the fatal error.
  Status Run();
  // Thread- and signal-safe.
  void Stop();

 private:
  struct Conn;
  enum class State { kIdle, kCheckpoint, kRestartWait, kRestart };

  // server.cpp: connections, authentication, dispatch, pub/sub, status, kill.
  void Accept();
  void OnReadable(Conn* c);
  void OnWritable(Conn* c);
  void HandleFrame(Conn* c, const FrameHeader& h, const Payload& p);
  void HandleHello(Conn* c, const FrameHeader& h, const Payload& p);
  void SendWelcome(Conn* c, uint32_t seq, uint64_t upid, bool outside = false);
  void SendPhase(Conn* c);
  void RegisterMember(Conn* owner, const FrameHeader& h, const Payload& p);
  void RemoveMember(Conn* sub, uint64_t upid, const std::string& why);
  void KillAll(Conn* requester, uint32_t seq);
  void HandleLookup(Conn* c, const FrameHeader& h, const Payload& p);
  void HandlePublish(const Payload& p);
  // Sets key = value in the published table and answers the lookups waiting for it.
  void Publish(const std::string& key, const std::string& value);
  // Publishes "gone.<upid>": the process has left the computation (killed, crashed or exited). A plugin
  // waiting for a peer that will never answer (the channels plugin rebuilding a connection at resume)
  // looks it up instead of waiting out its timeout.
  void NoteGone(uint64_t upid);
  void SendStatus(Conn* c, uint32_t seq);
  void Send(Conn* c, FrameBuilder& b);
  void SendError(Conn* c, uint32_t seq, const std::string& reason);
  void Drop(Conn* c, const std::string& why);
  void Reap();
  void UpdateInterest(Conn* c);
  size_t ProcCount() const;

  // server_sub.cpp: sub-coordinator mode (o_.parent set): relay between local peers and the root.
  Status ConnectUpstream();
  void OnUpstreamReadable();
  void SubHandleFrame(Conn* c, const FrameHeader& h, const Payload& p);
  void SubForwardHello(Conn* c, const FrameHeader& h, const Payload& p);
  void SubForward(Conn* c, const FrameHeader& h, const Payload& p);
  void SubStartPhase(const Payload& p);
  void SubOnPhaseDone(Conn* c, const Payload& p);
  void SubPeerGone(Conn* c, const std::string& why);
  void SubFinishPhaseIfDone();
  void SubAnswerPhase(bool levels);
  bool SendUp(uint16_t type, uint32_t seq, const char* payload, size_t len);
  void SendRaw(Conn* c, uint16_t type, uint32_t seq, const char* payload, size_t len);

  // server_barrier.cpp: checkpoint and restart barriers.
  void RequestCheckpoint(Conn* requester, uint32_t seq);
  void BeginGeneration();
  void StartPhase(const char* name);
  void OnPhaseDone(Conn* c, const Payload& p);
  void OnPeerGone(Conn* c, const std::string& why);
  void AddImages(Conn* c, const Payload& p);
  bool EarlyDurable(Conn* c, const Payload& p);
  void AdvanceIfBarrierComplete();
  // transient: the failure goes away if the generation is simply taken again (a process exited or exec'd
  // before it was suspended, a fork was in flight); a generation whose failures are all transient is retried.
  void FailGeneration(const std::string& why, bool transient = false);
  void FinishCheckpoint();
  void AbortLookups(const std::set<uint64_t>& conn_ids);
  bool LeftOnItsOwn(const Conn& c) const;
  bool ExecdImageConnected(const Conn& c, const Member& m) const;
  struct HereState {
    bool exists = false;
    char state = 0;           // R, S, D, T, Z, X...
    unsigned long flags = 0;  // PF_* flags
    std::string comm;
  };
  bool ReadHere(const Member& m, HereState* h) const;
  // c's process ended without exit() (killed, crashed; no BYE) on this host and no exec'd image of it is
  // here: for an MPI rank, the end of its job (see dead_ranks_).
  bool DiedWithoutExit(const Conn& c) const;
  // Another live process of the computation has the same mpi_rank as member `upid` of `conn`: a process
  // the rank started (system(), a helper: its environment names the rank too) rather than the rank.
  bool RankHeldByOther(const std::string& rank, const Conn* conn, uint64_t upid) const;
  // c's process is an MPI rank that ended without exit() (DiedWithoutExit), and no process that carries
  // its rank is left (so it was the rank, not one of its helpers, that died).
  bool DeadRank(const Conn& c) const;
  // A rank of an MPI job died (here or behind a sub-coordinator): see dead_ranks_.
  void NoteDeadRank(const Member& m);
  void StartPendingRestart();
  // The phase whose PHASE_DONE carries the images: write, or durable for forked checkpoints.
  const char* ImagePhase() const;
  void OnRestartHello(uint64_t upid);
  void CheckTimers();
  // The phase timeout: c did not answer `phase` in time. It is told so and dropped (Reap then runs the
  // peer-gone logic, which sees c->timed_out).
  void TimeOut(Conn* c, const std::string& phase);
  // A process dropped by the phase timeout (here or below a sub-coordinator): see lost_live_.
  void NoteLostLive(const Member& m, const std::string& why);
  // Whether a process dropped alive (lost_live_procs_) still runs on this host: --exit-on-last then stays,
  // so that `revive run` is told about the hang instead of finding no coordinator.
  bool LostLiveStillRuns() const;
  // Non-empty once a process was lost alive or an MPI rank died: the refusal every later checkpoint gets.
  std::string CheckpointRefusal() const;
  int NextTimeoutMs() const;
  std::string StateName() const;
  Status LoadRestartManifest(Manifest* m);

  struct Upstream;  // server_conn.h: a sub-coordinator's link to the root

  // server_tlevels.cpp: multi-level storage of transparent images (tlevels.h).
  void TLevelsBegin();
  void TLevelsPhaseFields(Conn* c, FrameBuilder* b, std::string* dir);
  bool TLevelsAddImage(Conn* c, const Payload& p, const std::string& pre, ManifestProc* mp);
  void TLevelsResumedHere();
  void TLevelsPublished();
  void SubTLevelsListen();
  void SubTLevelsPhase(const Payload& p);
  void SubTLevelsExchange();
  void SubTLevelsExchangeDone();
  static std::string TLevelsExchangeJob(Upstream* up);  // on the exchange thread: up->ex only
  static std::string TLevelsEncodeJob(Upstream* up);
  void SubTLevelsResumed();
  void SubTLevelsPublished(const Payload& p);

  ServerOptions o_;
  std::string secret_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop()
  uint16_t port_ = 0;
  bool stopping_ = false;
  bool ever_had_proc_ = false;
  // A restored process reported that it could not be restored: every other process of that restart is
  // told to exit when it comes (or at once, if it is here), and the coordinator leaves once none is left
  // and none can still come (failed_pending_ empty, or the grace period for latecomers over).
  std::string restart_failed_;
  double restart_failed_at_ = 0;
  // The failed restart's processes that have not come yet (upids): latecomers still reading their image.
  std::set<uint64_t> failed_pending_;
  // Someone (the failed restart's `revive restart`) was told restart_failed_ through STATUS: an
  // --exit-on-last coordinator need not stay for that question once nobody can come.
  bool failure_told_ = false;
  void NoteRestartFailed(uint64_t upid, const char* why, size_t n);
  // `revive restart` saw process upid's restorer end badly (`why`): true if the restart still awaits it
  // (the caller fails the restart); after a failed restart, it is no latecomer to stay for any more.
  bool RestorerEnded(uint64_t upid, const char* why, size_t n);
  // A failed restart's process may still come (told to exit then): a retry cannot use this coordinator yet.
  bool FailedRestartOpen() const;
  double started_at_ = 0;
  double last_sweep_ = 0;

  uint64_t next_conn_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<uint64_t> dead_;  // dropped during this loop turn; freed in Reap()
  uint64_t next_upid_ = 1;

  // Checkpoint / restart state.
  State state_ = State::kIdle;
  uint64_t generation_ = 0;     // last complete (or restored) generation
  uint64_t max_gen_seen_ = 0;   // highest ckpt-<G> on disk or started
  uint64_t cur_gen_ = 0;        // generation in progress
  std::string phase_;           // current phase name
  size_t phase_index_ = 0;
  double phase_started_ = 0;
  double ckpt_started_ = 0;
  double next_interval_ = 0;
  bool failed_ = false;
  bool retryable_ = false;      // every failure of this attempt was transient
  unsigned attempt_ = 0;        // retries of cur_gen_ so far
  bool retry_pending_ = false;  // cur_gen_ is taken again at retry_at_
  double retry_at_ = 0;
  std::string fail_reason_;
  bool silent_ = false;         // this attempt failed because a process did not answer in time (a hang)
  // Processes dropped by the phase timeout (directly, or behind a timed-out sub-coordinator). They may
  // still run, cut off from us, so no later generation would hold the whole computation: checkpoints are
  // refused from then on, naming the first (lost_live_why_ says why it was dropped).
  std::vector<std::string> lost_live_;
  std::string lost_live_why_;
  std::vector<Member> lost_live_procs_;
  // MPI ranks that ended without exit(). Their launcher is ending the job (or it hangs), so a generation
  // taken now would save a job that cannot finish, and would be the newest one a restart or an automatic
  // recovery takes: checkpoints are refused from then on, naming the first.
  std::vector<std::string> dead_ranks_;
  std::set<uint64_t> participants_;  // conn ids in the barrier
  std::set<uint64_t> waiting_;       // conn ids whose PHASE_DONE is outstanding
  std::set<uint64_t> early_durable_;  // --fork: reported their image before phase durable (exiting)
  std::map<uint64_t, std::unique_ptr<Member>> departed_;  // upid -> processes behind a sub that left during this generation
  std::vector<std::pair<uint64_t, uint32_t>> requesters_;  // (conn id, seq) awaiting CKPT_DONE
  Manifest manifest_;                // being built for cur_gen_
  std::set<uint64_t> restart_expected_;  // upids still to come back
  TLevelsConfig tl_;                 // REVIVE_LEVELS at the root
  unsigned cur_levels_ = 0;          // levels of cur_gen_ (0: the checkpoint directory only)
  std::map<std::string, std::string> tl_partner_, tl_from_;  // host -> its partner; partner -> owner
  std::map<std::string, std::vector<std::string>> tl_group_;  // host -> its L3 group's hosts, in order
  bool tl_here_ = false;             // cur_gen_ kept on this host by the root itself (no sub-coordinators)
  // That case's L4 copies and pruning, each with its "finished" flag (joined once finished, or at the end).
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> tl_background_;

  // Sub-coordinator state.
  std::unique_ptr<Upstream> up_;

  // Pub/sub.
  std::map<std::string, std::string> kv_;
  std::multimap<std::string, std::pair<uint64_t, uint32_t>> lookup_waiters_;
};

}  // namespace revive::coord
