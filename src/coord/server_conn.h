// One peer of the coordinator (internal to server*.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "coord/server.h"

namespace revive::coord {

constexpr double kAuthTimeoutSeconds = 10;          // to send a valid HELLO after accept
constexpr double kPartialFrameTimeoutSeconds = 30;  // a started frame may stay incomplete this long

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
  bool close_after_flush = false;
  double since = 0;         // accept time, or when a partial frame started
  bool said_bye = false;

  // Processes.
  uint64_t upid = 0;
  uint64_t pid = 0;
  std::string host;
  std::string prog;
  bool awaiting_restart = false;  // restored, waiting for reconnect/refill/resume
  std::string state = "running";  // for STATUS: running, or the last phase it completed

  std::string Describe() const {
    return "process upid " + std::to_string(upid) + " (" + prog + ", pid " + std::to_string(pid) + " on " +
           host + ")";
  }
};

double MonotonicSeconds();
double WallSeconds();

}  // namespace revive::coord
