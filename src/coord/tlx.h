// The host-to-host image exchange of transparent multi-level storage (docs/storage-levels.md,
// "Transparent images"): one TCP connection per transfer, the sender proving it holds the computation's
// secret as clients do to the coordinator (HMAC-SHA256 of a fresh nonce from the receiver), then files:
//   "tlx 1 <generation> <from host> <n>\n", n x ("<name> <size>\n" <size bytes> "<XXH3-64 hex>\n"),
// answered "OK\n" or "ERR <reason>\n". The receiver writes each file to <dest>/.<name>.tmp, checks the
// checksum, fsyncs and renames it (then fsyncs the directory): a file present under its name is complete.
// Blocking sockets with timeouts; runs in sub-coordinators and `revive` helpers, never in the program.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace revive::coord {

struct TlxFile {
  std::string name;  // a file name (no '/')
  uint64_t size = 0;
  uint64_t xxh3 = 0;
};

// A listening socket on ip (port 0 = any); *port is the one chosen.
Status TlxListen(const std::string& ip, int* fd, uint16_t* port);

// Sends `paths` (each under its base name) to "ip:port". *sent gets each file's size and checksum.
Status TlxSend(const std::string& addr, const std::string& secret, uint64_t gen, const std::string& from_host,
               const std::vector<std::string>& paths, std::vector<TlxFile>* sent, double timeout_s);

// Accepts one sender on listen_fd within timeout_s and stores what it sends in dest_dir (created).
// expect_from: the sender must say it is that host ("" = any; *from_out gets it); "{from}" in dest_dir
// is replaced by the sender's host. Errors name the peer and the file.
Status TlxReceive(int listen_fd, const std::string& secret, uint64_t gen, const std::string& expect_from,
                  const std::string& dest_dir, double timeout_s, std::vector<TlxFile>* got,
                  std::string* from_out = nullptr);

// The pieces other protocols on the same listeners use (tencode.h, the distributed L3 encode): a connection
// whose peer proved the secret (TlxConnect: as the sender; TlxAccept: as the receiver, which sends
// "ERR <reason>" to a peer it refuses; *who names the peer for errors), and whole reads and writes on it.
Status TlxConnect(const std::string& addr, const std::string& secret, double timeout_s, int* fd);
Status TlxAccept(int listen_fd, const std::string& secret, double timeout_s, int* fd, std::string* who);
Status TlxWrite(int fd, const void* p, size_t n, const std::string& what);
Status TlxRead(int fd, void* p, size_t n, const std::string& what);
Status TlxReadLine(int fd, std::string* line, const std::string& what);
// Tells the peer "ERR <why>" (best effort) and returns the error "<who>: <why>".
Status TlxRefuse(int fd, const std::string& who, const std::string& why);
bool TlxGoodHost(const std::string& h);

}  // namespace revive::coord
