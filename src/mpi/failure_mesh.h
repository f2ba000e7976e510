// FailureMesh: a failure detector for MPIs without ULFM (Open MPI 4.1 here). Every rank of a communicator
// holds one TCP connection to every other rank, made at construction; nothing travels on them while all
// are alive. When a process dies, its kernel closes its sockets, so every survivor sees end-of-file on its
// connection to it, on any node, within the time of a poll. MPI itself cannot be used for this: a survivor
// that sends to or receives from a SIGKILLed peer waits forever, on TCP and on shared memory
// (docs/status.md). A perfect detector for process crashes; a whole node that vanishes without resetting
// its connections is seen only through TCP keepalive (set here: about 10 s).
#ifndef REVIVE_SRC_MPI_FAILURE_MESH_H_
#define REVIVE_SRC_MPI_FAILURE_MESH_H_

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"

namespace revive::mpi {

class FailureMesh {
 public:
  // Collective over `comm`, whose ranks must all be alive: listen, allgather the addresses over `comm`,
  // connect to every lower rank, accept every higher one. The address published is $REVIVE_AFT_ADDR,
  // else the first IPv4 address of the host name, else 127.0.0.1.
  static Status Open(MPI_Comm comm, std::unique_ptr<FailureMesh>* out);
  ~FailureMesh();
  FailureMesh(const FailureMesh&) = delete;
  FailureMesh& operator=(const FailureMesh&) = delete;

  // Looks at every connection for at most `timeout_ms` (0: just look). True when some peer is known dead
  // or has started a recovery (sent its failure set): the caller must stop communicating and recover.
  bool Poll(int timeout_ms);
  // The ranks known dead so far (sorted).
  std::vector<int> Dead() const;

  // Agreement among the survivors on the set of dead ranks: two rounds over the connections (send my set,
  // receive every live peer's, union; then send the union and check that every survivor sent the same).
  // A peer whose connection closes during the rounds is added to the set. If the second round shows
  // disagreement (a failure while the first round ran), the result is an error: recovery from failures
  // during recovery is not supported.
  Status Agree(std::vector<int>* dead);

  // After Agree: every survivor sends `mine` (the same length at every rank) to every other survivor and
  // receives theirs: (*all)[p] is rank p's, empty for the dead. A death during the exchange is an error.
  Status Exchange(const std::vector<char>& mine, std::vector<std::vector<char>>* all);

  // After Agree, point to point: one block of any length to a live `peer`, read there by RecvBlock in the
  // same order. For blocks too large for Exchange's all-to-all (which writes everything before reading: it
  // would wait for good once the sockets' buffers fill), e.g. the parity and copies that rebuild a dead
  // rank's window (src/rma/rank_rebuild.h): the senders only write, the receiver only reads.
  Status SendBlock(int peer, const std::vector<uint8_t>& data);
  Status RecvBlock(int peer, std::vector<uint8_t>* data);

 private:
  FailureMesh(int rank, int size) : rank_(rank), size_(size), fd_(static_cast<size_t>(size), -1),
                                    dead_(static_cast<size_t>(size), 0), notified_(static_cast<size_t>(size), 0) {}
  void MarkDead(int peer);
  Status SendSet(int round, const std::vector<char>& set);
  // Reads one round message from `peer` into `set`; false (and the peer marked dead) on end-of-file.
  bool RecvSet(int peer, int round, std::vector<char>* set);

  int rank_, size_;
  std::vector<int> fd_;          // connection to each peer, -1 for self and the dead
  std::vector<char> dead_;       // 1: connection closed
  std::vector<char> notified_;   // 1: that peer sent a round message we have not read yet
};

}  // namespace revive::mpi

#endif  // REVIVE_SRC_MPI_FAILURE_MESH_H_
