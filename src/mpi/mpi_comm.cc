#include "mpi_comm.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace revive::mpi {

// A failed MPI call in a collective decision leaves the ranks disagreeing about the checkpoint; there is
// no safe way to continue, so say which call failed and abort the job (MPI's default handler would too).
static void Check(int rc, const char* what, MPI_Comm comm) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "revive_mpi: %s failed: %.*s\n", what, len, msg);
  MPI_Abort(comm, 1);
}

namespace {
thread_local WaitHook g_hook = nullptr;
thread_local void* g_hook_ctx = nullptr;
}  // namespace

void SetWaitHook(WaitHook hook, void* ctx) {
  g_hook = hook;
  g_hook_ctx = ctx;
}

// Every collective is started nonblocking and completed here, so that a recovery zone can watch for
// failures while it waits.
void MpiComm::Wait(int n, MPI_Request* reqs, const char* what) {
  if (g_hook) {
    try {
      g_hook(g_hook_ctx, n, reqs);
    } catch (...) {
      abandoned_ = true;
      throw;
    }
    return;
  }
  Check(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE), what, comm_);
}

MpiComm::MpiComm(MPI_Comm comm) {
  Check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", comm);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Not after a failure: Open MPI keeps progressing the interrupted collective, which reads the freed
  // communicator (a survivor crashed in mca_pml_ob1_recv_req_start, 2 of ~30 replace-mode kills).
  if (!finalized && comm_ != MPI_COMM_NULL && !abandoned_) MPI_Comm_free(&comm_);
}

void MpiComm::barrier() {
  MPI_Request rq;
  Check(MPI_Ibarrier(comm_, &rq), "MPI_Ibarrier", comm_);
  Wait(1, &rq, "MPI_Ibarrier");
}

// The buffers of a nonblocking collective live on the heap and are freed only once it completed: when the
// recovery hook throws, the collective stays in progress inside MPI and may still write there.
template <class T>
struct CollBuf {
  T in{}, out{};
};

uint64_t MpiComm::allreduce_min_u64(uint64_t v) {
  auto* b = new CollBuf<uint64_t>{v, 0};
  MPI_Request rq;
  Check(MPI_Iallreduce(&b->in, &b->out, 1, MPI_UINT64_T, MPI_MIN, comm_, &rq), "MPI_Iallreduce(min)", comm_);
  Wait(1, &rq, "MPI_Iallreduce(min)");
  const uint64_t out = b->out;
  delete b;
  return out;
}

bool MpiComm::allreduce_and(bool v) {
  auto* b = new CollBuf<int>{v ? 1 : 0, 0};
  MPI_Request rq;
  Check(MPI_Iallreduce(&b->in, &b->out, 1, MPI_INT, MPI_LAND, comm_, &rq), "MPI_Iallreduce(and)", comm_);
  Wait(1, &rq, "MPI_Iallreduce(and)");
  const bool out = b->out != 0;
  delete b;
  return out;
}

void MpiComm::bcast(void* buf, size_t n, int root) {
  // MPI counts are int: send in pieces of at most 1 GiB, each through a heap copy (CollBuf's reason; the
  // library broadcasts only small metadata).
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const int piece = n > (1u << 30) ? (1 << 30) : static_cast<int>(n);
    char* tmp = new char[static_cast<size_t>(piece)];
    std::memcpy(tmp, p, static_cast<size_t>(piece));
    MPI_Request rq;
    Check(MPI_Ibcast(tmp, piece, MPI_BYTE, root, comm_, &rq), "MPI_Ibcast", comm_);
    Wait(1, &rq, "MPI_Ibcast");
    std::memcpy(p, tmp, static_cast<size_t>(piece));
    delete[] tmp;
    p += piece;
    n -= static_cast<size_t>(piece);
  }
}

std::vector<std::string> MpiComm::allgather_string(const std::string& s) {
  // Lengths first, then the bytes with Allgatherv (int counts: the strings are metadata, well below 2 GiB).
  if (s.size() > static_cast<size_t>(INT_MAX / (size_ > 0 ? size_ : 1))) {
    std::fprintf(stderr, "revive_mpi: allgather of %zu bytes per rank is too large\n", s.size());
    MPI_Abort(comm_, 1);
  }
  // Heap buffers freed only after completion (CollBuf's reason).
  struct Bufs {
    int len = 0;
    std::vector<int> lens, displs;
    std::string mine, all;
  };
  auto* b = new Bufs;
  b->len = static_cast<int>(s.size());
  b->mine = s;
  b->lens.resize(static_cast<size_t>(size_));
  b->displs.resize(static_cast<size_t>(size_));
  MPI_Request rq;
  Check(MPI_Iallgather(&b->len, 1, MPI_INT, b->lens.data(), 1, MPI_INT, comm_, &rq), "MPI_Iallgather", comm_);
  Wait(1, &rq, "MPI_Iallgather");
  long total = 0;
  for (int r = 0; r < size_; ++r) {
    b->displs[static_cast<size_t>(r)] = static_cast<int>(total);
    total += b->lens[static_cast<size_t>(r)];
  }
  if (total > INT_MAX) {
    std::fprintf(stderr, "revive_mpi: allgather of %ld bytes in all is too large\n", total);
    MPI_Abort(comm_, 1);
  }
  b->all.assign(static_cast<size_t>(total), '\0');
  Check(MPI_Iallgatherv(b->mine.data(), b->len, MPI_BYTE, b->all.data(), b->lens.data(), b->displs.data(), MPI_BYTE,
                        comm_, &rq),
        "MPI_Iallgatherv", comm_);
  Wait(1, &rq, "MPI_Iallgatherv");
  const std::vector<int> displs = std::move(b->displs), lens = std::move(b->lens);
  const std::string all = std::move(b->all);
  delete b;
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

// Nonblocking sends and receives, pieces of at most 1 GiB (int counts), one tag: MPI keeps messages between
// a pair in order, so the pieces and the listed messages match up in order on both sides.
void MpiComm::exchange(const std::vector<SendBuf>& sends, const std::vector<RecvBuf>& recvs) {
  constexpr size_t kPiece = size_t{1} << 30;
  constexpr int kTag = 7301;
  std::vector<MPI_Request> reqs;
  for (const RecvBuf& r : recvs) {
    char* p = static_cast<char*>(r.data);
    size_t n = r.size;
    do {
      const int piece = static_cast<int>(n > kPiece ? kPiece : n);
      reqs.emplace_back();
      Check(MPI_Irecv(p, piece, MPI_BYTE, r.peer, kTag, comm_, &reqs.back()), "MPI_Irecv", comm_);
      p += piece;
      n -= static_cast<size_t>(piece);
    } while (n > 0);
  }
  for (const SendBuf& sb : sends) {
    const char* p = static_cast<const char*>(sb.data);
    size_t n = sb.size;
    do {
      const int piece = static_cast<int>(n > kPiece ? kPiece : n);
      reqs.emplace_back();
      Check(MPI_Isend(p, piece, MPI_BYTE, sb.peer, kTag, comm_, &reqs.back()), "MPI_Isend", comm_);
      p += piece;
      n -= static_cast<size_t>(piece);
    } while (n > 0);
  }
  Wait(static_cast<int>(reqs.size()), reqs.data(), "MPI_Waitall");
}

std::shared_ptr<detail::Comm> make_mpi_comm(MPI_Comm comm) { return std::make_shared<MpiComm>(comm); }

}  // namespace revive::mpi
