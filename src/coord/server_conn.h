// One peer of the coordinator (internal to server*.cpp).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include "coord/client.h"
#include "coord/server.h"

namespace revive::coord {

constexpr uint64_t kUpstreamId = UINT64_MAX - 1;    // epoll tag of a sub-coordinator's root link
constexpr uint64_t kExchangeDoneId = UINT64_MAX - 2;  // epoll tag of a sub's "exchange finished" eventfd
constexpr double kAuthTimeoutSeconds = 10;          // to send a valid HELLO after accept
constexpr double kPartialFrameTimeoutSeconds = 30;  // a started frame may stay incomplete this long

// A process of the computation: directly connected (role proc) or behind a sub-coordinator.
struct Member {
  uint64_t upid = 0;
  uint64_t pid = 0;
  std::string host;
  std::string prog;
  std::string mpi_rank;           // HELLO mpi_rank: "" unless an MPI launcher started it
  bool awaiting_restart = false;  // restored, waiting for reconnect/refill/resume
  std::string state = "running";  // for STATUS: running, restored, or the last phase it completed

  std::string Describe() const {
    return "process upid " + std::to_string(upid) + " (" + prog + ", pid " + std::to_string(pid) + " on " +
           host + ")";
  }
};

struct Server::Conn {
  enum class Role { kUnauth, kProc, kCli, kSub };

  uint64_t id = 0;
  int fd = -1;
  Role role = Role::kUnauth;
  uint8_t nonce[32] = {0};
  std::string in;       // received, not yet parsed
  std::string out;      // queued for sending
  size_t out_off = 0;   // bytes of out already sent
  bool want_out = false;  // EPOLLOUT registered
  bool dead = false;
  double since = 0;         // accept time, or when a partial frame started
  bool said_bye = false;
  std::string drop_reason;  // why Drop() closed it; the barrier learns it in Reap()
  bool timed_out = false;   // dropped by the phase timeout: alive but not answering, never a transient loss
  std::string host;         // from HELLO
  std::string addr;         // peer address "ip:port", for messages

  // role proc: exactly one member (itself); role sub: the processes behind it, by upid.
  std::map<uint64_t, Member> members;

  // On a sub-coordinator: a local process whose HELLO went up to the root and awaits its WELCOME.
  uint32_t hello_seq = 0;

  bool HasMembers(bool awaiting) const {
    for (const auto& [u, m] : members)
      if (m.awaiting_restart == awaiting) return true;
    return false;
  }
  Member* Self() { return members.empty() ? nullptr : &members.begin()->second; }
  std::string Describe() const {
    if (role == Role::kSub)
      return "sub-coordinator on " + host + " (" + std::to_string(members.size()) + " processes)";
    if (!members.empty()) return members.begin()->second.Describe();
    return role == Role::kCli ? "cli" : "unauthenticated peer";
  }
};

// A sub-coordinator's link to the root and the barrier phase it relays to its local processes.
struct Server::Upstream {
  Client client;  // role=sub
  uint32_t seq = 0;
  std::map<uint32_t, std::pair<uint64_t, uint32_t>> pending;  // our seq -> (local conn id, its seq)
  bool in_phase = false;
  std::string phase;
  double phase_started = 0;      // MonotonicSeconds(): our own phase timeout for the processes here
  bool restart = false;          // restart barrier: the restored processes take part
  std::set<uint64_t> waiting;    // local conn ids
  std::set<uint64_t> parts;
  bool failed = false;
  bool retryable = false;  // every failure of this barrier was transient (see Server::FailGeneration)
  std::string error;
  struct Image {
    uint64_t upid;
    std::string image;
    uint64_t bytes;
  };
  std::vector<Image> images;
  // --fork: processes that reported their image before phase durable (exiting), and those images.
  std::set<uint64_t> early;
  std::vector<Image> early_images;
  // Multi-level storage of transparent images (server_tlevels.cpp): this host, the exchange listener,
  // what the root said for the generation in progress, and the background L4 copies.
  std::string host;
  int tlx_fd = -1;  // L3: the group's images
  int tlp_fd = -1;  // L2: the partner copy (its own listener, so a generation with both never mixes them up)
  struct TL {
    unsigned levels = 0;
    uint64_t gen = 0;
    std::string dir, partner, partner_addr, from;
    std::vector<std::string> group, group_addrs;  // L3: the group's hosts and exchange addresses, in order
    int parity = 1;
    int keep = 2;                         // REVIVE_KEEP at the root: complete generations kept per level
    std::map<std::string, uint64_t> xxh;  // image path -> XXH3-64
  } tl;
  // The image phase's checksums, L2 exchange and L3 encode (server_tlevels.cpp) run on `thread`, on these
  // copies, so that the loop keeps serving the processes (with --fork they run meanwhile). The thread
  // writes only here, then sets `finished` and writes done_fd (an eventfd in the loop's epoll set); the
  // loop reads the results after joining it (Server::SubTLevelsExchangeDone) and answers the phase.
  struct Exchange {
    std::thread thread;
    int done_fd = -1;
    std::atomic<bool> finished{false};
    std::string phase;  // the phase it answers: a result that comes after the root moved on is dropped
    TL tl;              // the generation's, its xxh filled by the thread
    std::vector<std::string> images;
    std::string host, secret;
    int tlx_fd = -1, tlp_fd = -1;
    std::string error;  // "" = done
  } ex;
  std::vector<std::thread> background;
  ~Upstream() {
    if (ex.thread.joinable()) ex.thread.join();  // bounded by the exchange's timeouts
    if (ex.done_fd >= 0) ::close(ex.done_fd);
    for (auto& t : background) t.join();
    if (tlx_fd >= 0) ::close(tlx_fd);
    if (tlp_fd >= 0) ::close(tlp_fd);
    client.close();
  }
};

// What a HELLO says about a process (host, prog, pid; awaiting_restart from restart=1; upid left 0).
Member MemberFromHello(const Payload& p);
// A PHASE_DONE's verdict: true if ok=1, else false with *why = "<who> failed phase <phase>: <error>".
bool PhaseDoneOk(const Payload& p, const std::string& who, const std::string& phase, std::string* why);
// A failed PHASE_DONE that says retry=1: the process refused for now (a fork in flight), not for good.
bool PhaseDoneRetryable(const Payload& p);
// A failed PHASE_DONE that says silent=1: a process below a sub-coordinator did not answer in time (a hang,
// for `revive run`); the root reports it in CKPT_DONE.
bool PhaseDoneSilent(const Payload& p);

double MonotonicSeconds();
double WallSeconds();

}  // namespace revive::coord
