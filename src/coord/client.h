// Client side of the coordinator protocol: connect with back-off, answer the CHALLENGE, send and receive
// frames with timeouts. Used by librevive_inject.so (process side) and by the `revive` command.
//
// libc only, no exceptions, no malloc, no static constructors: the frame buffers are mmap'ed at connect(),
// errors go to a fixed buffer, and Client is trivially destructible so the injected library can keep one
// in a global (call close() yourself). Not thread-safe: one thread talks to the coordinator at a time.
//
// Signal context: send()/recv()/close() use only poll/read/write/munmap and may run while user threads are
// suspended. connect() reads the secret file and, for a host name that is not a numeric address, calls
// getaddrinfo (which allocates): use a numeric REVIVE_COORD_HOST on restore paths.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "coord/wire.h"

namespace revive::coord {

struct ClientOptions {
  const char* host = "127.0.0.1";
  uint16_t port = 7779;
  const char* secret_file = nullptr;  // required: the computation's secret
  int connect_timeout_ms = 10000;     // total time spent retrying with back-off
  int io_timeout_ms = 30000;          // per send, and for the handshake replies
  int min_fd = 0;                     // move the socket to an fd >= this (keep low fds for the program)
  // HELLO fields.
  const char* role = "proc";  // proc | cli | sub
  const char* prog = "";
  bool restart = false;
  uint64_t upid = 0;          // sent when restart (or nonzero)
  uint64_t pid = 0;           // 0 = getpid()
  // HELLO `host`: which host the process runs on (recorded in the manifest). nullptr: REVIVE_HOST_ID if
  // set, else gethostname(); "": gethostname(). Network namespaces share the UTS name, hence the id.
  const char* host_id = nullptr;
  // HELLO `mpi_rank` (when not null or ""): the process is this rank of an MPI job.
  const char* mpi_rank = nullptr;
};

// What WELCOME told us, copied out of the receive buffer.
struct Welcome {
  uint64_t upid;
  uint64_t generation;
  uint64_t interval;
  bool compress;
  bool fork;
  // Joined while a checkpoint is in progress that it is not part of (its parent's fork wrapper then
  // refuses that checkpoint: the generation would lack the child).
  bool outside;
  uint64_t phase_timeout;  // the coordinator's --phase-timeout in seconds (0: not said)
  char ckpt_dir[4096];
};

// Environment-derived options (REVIVE_COORD_HOST, REVIVE_COORD_PORT, REVIVE_SECRET_FILE); pointers into
// the environment. Returns false with a message if the port is malformed or the secret file is unset.
bool client_options_from_env(ClientOptions* o, char* err, size_t err_len);

// Reads the secret file (1..4096 bytes). Returns its length, or -1 with a message naming the file.
long read_secret_file(const char* path, uint8_t* out, size_t cap, char* err, size_t err_len);

// Answer to a challenge: hex(HMAC-SHA256(secret, nonce bytes)) into out (64 chars, no terminator).
void challenge_proof(const uint8_t* secret, size_t secret_len, const uint8_t nonce[32], char out[64]);

class Client {
 public:
  static constexpr size_t kTxCap = 64 * 1024;
  static constexpr size_t kRxCap = kHeaderSize + kMaxPayload;

  // TCP connect (retrying while refused/unreachable until connect_timeout_ms), CHALLENGE, HELLO, WELCOME.
  // On an ERROR reply the message is "coordinator HOST:PORT refused us: REASON".
  bool connect(const ClientOptions& o, Welcome* w);
  // Sends a frame built in tx_buffer() (or anywhere). Waits at most io_timeout_ms for the socket.
  bool send(const uint8_t* frame, size_t len);
  bool send(FrameBuilder& b);
  // Receives one frame; the payload views into an internal buffer valid until the next recv().
  // Returns 1 on a frame, 0 on timeout (timeout_ms < 0 waits forever), -1 on error/EOF (see error()).
  int recv(FrameHeader* h, Payload* p, int timeout_ms);
  void close();

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // The socket now has another number (the engine moved it out of a program's dup2 target).
  void renumber(int fd) { fd_ = fd; }
  // A fork child's copy of its parent's connection: forgets the descriptor (the caller closes its copy)
  // and the frame count, writing nothing else (a fork child pays a copy-on-write fault per page written);
  // the buffers are the child's own copy, which the next connect() replaces.
  void forget() {
    fd_ = -1;
    if (seq_) seq_ = 0;
  }
  uint8_t* tx_buffer() { return tx_; }
  uint32_t next_seq() { return ++seq_; }
  const char* error() const { return err_; }

 private:
  bool fail(const char* a, const char* b = "", const char* c = "", const char* d = "");
  bool tcp_connect(const ClientOptions& o);
  bool io_wait(short events, int timeout_ms, const char* what);
  bool read_exact(uint8_t* p, size_t n, int timeout_ms, bool* timed_out);

  int fd_ = -1;
  int io_timeout_ms_ = 30000;
  uint32_t seq_ = 0;
  uint8_t* map_ = nullptr;  // tx_ then rx_, one mapping
  uint8_t* tx_ = nullptr;
  uint8_t* rx_ = nullptr;
  char peer_[80] = {0};  // "host:port" for messages
  char err_[512] = {0};
};

// Small bounded string helpers (no stdio) shared by client and server code.
// A restored process that cannot be restored tells the restart's coordinator (REVIVE_COORD_HOST/PORT,
// REVIVE_SECRET_FILE from the environment), which then ends every process of the restart instead of
// waiting for this one forever: `revive restart` returns instead of hanging. `why` is logged. No
// allocation (mmap only); best effort, false if no coordinator is configured or reachable.
bool report_restore_failure(uint64_t upid, const char* why);
// The same with the coordinator given (a restored engine: its configuration, not the image's environment).
// On failure, why it failed goes to err (when given).
bool report_restore_failure(const char* host, uint16_t port, const char* secret_file, uint64_t upid,
                            const char* why, char* err = nullptr, size_t err_len = 0);

void str_copy(char* out, size_t cap, const char* s);
void str_append(char* out, size_t cap, const char* s);
void str_append_u64(char* out, size_t cap, uint64_t v);

}  // namespace revive::coord
