// revive::mpi::Recovery (<revive/recovery_mpi.hpp>): CRAFT's AFT zone. Two backends:
//  - default: revive's TCP failure mesh (failure_mesh.h) + MPI_Comm_create_group over the survivors, for
//    MPIs without working ULFM (Open MPI 4.1 and MPICH 4.0.2 of Debian 12: docs/status.md);
//  - REVIVE_ULFM (CMake option REVIVE_WITH_ULFM, only where MPIX_Comm_shrink exists): failures reported by
//    MPI (MPIX_ERR_PROC_FAILED / MPIX_ERR_REVOKED), MPIX_Comm_revoke, MPIX_Comm_shrink, MPIX_Comm_agree.
// Both replace dead ranks the same way: MPI_Comm_spawn from the survivors' communicator,
// MPI_Intercomm_merge, MPI_Comm_split keyed by the old rank so every rank keeps its number.
#include "revive/recovery_mpi.hpp"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "failure_mesh.h"
#include "mpi_comm.h"

#if REVIVE_ULFM
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI declares ULFM here; MPICH in mpi.h (and has no mpi-ext.h)
#endif
#endif

namespace revive::mpi {

namespace {
constexpr int kTag = 4711;  // MPI_Comm_create_group tag (plus the recovery count)

double Now() { return MPI_Wtime(); }

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error("revive_mpi: recovery: " + what); }

void CheckRc(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  Fail(std::string(what) + " failed: " + std::string(msg, static_cast<size_t>(len)));
}
}  // namespace

struct Recovery::Impl {
  Mode mode = Mode::kReplace;
  std::string exe;
  std::vector<std::string> args;
  MPI_Comm comm = MPI_COMM_NULL;
  bool replacement = false;
  int recoveries = 0;
  double last_seconds = 0;
  std::unique_ptr<FailureMesh> mesh;  // default backend only
  std::vector<std::unique_ptr<char[]>> zone_bufs;  // zone_buffer(): this run of the zone body

  void OpenDetector() {
#if !REVIVE_ULFM
    mesh.reset();
    Status s = FailureMesh::Open(comm, &mesh);
    if (!s.ok()) Fail(s.ToString());
#endif
    // Connect every pair now, while all are alive: Open MPI's TCP transport connects a pair at its first
    // message, and a first message to a rank that has died makes the connect fail and the survivor crash
    // (bus error / corrupted heap, seen in 1 of 10 shrink runs before this). Sends on a connection made
    // earlier just stay pending.
    int size = 0;
    MPI_Comm_size(comm, &size);
    std::vector<int> out(static_cast<size_t>(size)), in(static_cast<size_t>(size));
    CheckRc(MPI_Alltoall(out.data(), 1, MPI_INT, in.data(), 1, MPI_INT, comm), "MPI_Alltoall(connect all pairs)");
  }

  // Survivors (newcomm of the survivors) and replacements (parent intercommunicator) meet here.
  // info = {recoveries, dead ranks...} travels from the survivors' rank 0 to the replacements.
  MPI_Comm Merge(MPI_Comm inter, bool high, std::vector<int>* info, int my_old_rank) {
    MPI_Comm merged = MPI_COMM_NULL, fixed = MPI_COMM_NULL;
    CheckRc(MPI_Intercomm_merge(inter, high ? 1 : 0, &merged), "MPI_Intercomm_merge");
    int len = static_cast<int>(info->size());
    CheckRc(MPI_Bcast(&len, 1, MPI_INT, 0, merged), "MPI_Bcast(recovery info)");
    info->resize(static_cast<size_t>(len));
    CheckRc(MPI_Bcast(info->data(), len, MPI_INT, 0, merged), "MPI_Bcast(recovery info)");
    if (high) {  // a replacement: its place is the dead rank with its index among the replacements
      int r = 0, n = 0;
      MPI_Comm_rank(merged, &r);
      MPI_Comm_size(merged, &n);
      const int ndead = len - 1, idx = r - (n - ndead);
      if (idx < 0 || idx >= ndead) Fail("replacement " + std::to_string(r) + " has no dead rank to take");
      my_old_rank = (*info)[static_cast<size_t>(1 + idx)];
    }
    CheckRc(MPI_Comm_split(merged, 0, my_old_rank, &fixed), "MPI_Comm_split");
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    return fixed;
  }

  MPI_Comm Respawn(MPI_Comm survivors, const std::vector<int>& dead, int my_old_rank) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<int> errs(dead.size());
    MPI_Comm inter = MPI_COMM_NULL;
    CheckRc(MPI_Comm_spawn(exe.c_str(), argv.data(), static_cast<int>(dead.size()), MPI_INFO_NULL, 0, survivors,
                           &inter, errs.data()),
            ("MPI_Comm_spawn of " + exe).c_str());
    std::vector<int> info{recoveries + 1};
    info.insert(info.end(), dead.begin(), dead.end());
    return Merge(inter, false, &info, my_old_rank);
  }

  void Recover() {
    const double t0 = Now();
    int old_rank = 0, old_size = 0;
    MPI_Comm_rank(comm, &old_rank);
    MPI_Comm_size(comm, &old_size);
    std::vector<int> dead;
    MPI_Comm survivors = MPI_COMM_NULL;
#if REVIVE_ULFM
    MPIX_Comm_revoke(comm);  // idempotent; survivors blocked elsewhere on comm get MPIX_ERR_REVOKED
    CheckRc(MPIX_Comm_shrink(comm, &survivors), "MPIX_Comm_shrink");
    // The dead: ranks of comm missing from the (agreed) shrunk communicator, the same on every survivor.
    MPI_Group g_old, g_new;
    MPI_Comm_group(comm, &g_old);
    MPI_Comm_group(survivors, &g_new);
    std::vector<int> all(static_cast<size_t>(old_size)), where(static_cast<size_t>(old_size));
    for (int i = 0; i < old_size; ++i) all[static_cast<size_t>(i)] = i;
    MPI_Group_translate_ranks(g_old, old_size, all.data(), g_new, where.data());
    for (int i = 0; i < old_size; ++i)
      if (where[static_cast<size_t>(i)] == MPI_UNDEFINED) dead.push_back(i);
    MPI_Group_free(&g_old);
    MPI_Group_free(&g_new);
#else
    Status s = mesh->Agree(&dead);
    if (!s.ok()) Fail(s.ToString());
    MPI_Group g_old, g_surv;
    MPI_Comm_group(comm, &g_old);
    MPI_Group_excl(g_old, static_cast<int>(dead.size()), dead.data(), &g_surv);
    // Collective over the survivors only (the dead take no part), unlike MPI_Comm_create/split/dup.
    CheckRc(MPI_Comm_create_group(comm, g_surv, kTag + recoveries, &survivors), "MPI_Comm_create_group");
    MPI_Group_free(&g_old);
    MPI_Group_free(&g_surv);
#endif
    int survivor_rank = 0;  // the report comes from the first survivor (rank 0 may be a replacement)
    MPI_Comm_rank(survivors, &survivor_rank);
    MPI_Comm next = survivors;
    if (mode == Mode::kReplace && !dead.empty()) {
      next = Respawn(survivors, dead, old_rank);
      MPI_Comm_free(&survivors);
    }
#if REVIVE_ULFM
    // Everyone must have come through: agree on success (a failure in between is reported here).
    int ok = 1;
    CheckRc(MPIX_Comm_agree(next, &ok), "MPIX_Comm_agree");
#endif
    // The broken communicator is left allocated: freeing it may wait for operations the dead never match.
    comm = next;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    ++recoveries;
    OpenDetector();
    last_seconds = Now() - t0;
    int r = 0, n = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    std::string list;
    for (int d : dead) list += (list.empty() ? "" : ",") + std::to_string(d);
    if (survivor_rank == 0)
      std::fprintf(stderr, "revive_mpi: recovery %d: rank(s) %s of %d died; %s, now %d ranks (%.3f s)\n", recoveries,
                   list.c_str(), old_size, mode == Mode::kReplace ? "replaced" : "shrunk", n, last_seconds);
  }

  // A failed wait: cancel what can be cancelled (receives), so that no late message lands in memory the
  // unwinding frees. Collectives cannot be cancelled; their buffers are the caller's to keep (zone_buffer).
  // MPI_Cancel of a collective's request is an error that Open MPI reports on MPI_COMM_WORLD (fatal by
  // default): return errors there while cancelling, and ignore them.
  static void Abandon(int n, MPI_Request* reqs) {
    MPI_Errhandler old;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < n; ++i)
      if (reqs[i] != MPI_REQUEST_NULL) MPI_Cancel(&reqs[i]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
    MPI_Errhandler_free(&old);
  }

  [[noreturn]] void Throw(const std::string& why) {
    throw PeerFailed("revive_mpi: rank failure detected (" + why + ")");
  }

  void WaitAll(int n, MPI_Request* reqs, MPI_Status* st) {
#if REVIVE_ULFM
    int rc = MPI_Waitall(n, reqs, st);
    if (rc == MPI_SUCCESS) return;
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (rc == MPI_ERR_IN_STATUS && st != MPI_STATUSES_IGNORE)
      for (int i = 0; i < n; ++i)
        if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) MPI_Error_class(st[i].MPI_ERROR, &cls);
    if (cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED || cls == MPIX_ERR_PROC_FAILED_PENDING ||
        rc == MPI_ERR_IN_STATUS) {
      MPIX_Comm_revoke(comm);  // wake the survivors that wait on someone alive
      Abandon(n, reqs);
      Throw("MPI error class " + std::to_string(cls));
    }
    CheckRc(rc, "MPI_Waitall");
#else
    // Test, then look at the mesh: spin first (latency), then sleep 1 ms in poll between tests.
    for (long spins = 0;; ++spins) {
      int done = 0;
      int rc = MPI_Testall(n, reqs, &done, st);
      if (rc != MPI_SUCCESS) CheckRc(rc, "MPI_Testall");
      if (done) return;
      if (mesh->Poll(spins < 2000 ? 0 : 1)) {
        std::string d;
        for (int r : mesh->Dead()) d += (d.empty() ? "dead rank " : ",") + std::to_string(r);
        Abandon(n, reqs);
        Throw(d.empty() ? "another rank started a recovery" : d);
      }
    }
#endif
  }

  void Check() {
#if !REVIVE_ULFM
    if (mesh->Poll(0)) Throw("seen by check()");
#endif
  }
};

namespace {
void HookWait(void* ctx, int n, MPI_Request* reqs) {
  static_cast<Recovery::Impl*>(ctx)->WaitAll(n, reqs, MPI_STATUSES_IGNORE);
}

// The library's collectives wait through the zone while it runs, and only then.
struct HookScope {
  explicit HookScope(Recovery::Impl* impl) { SetWaitHook(&HookWait, impl); }
  ~HookScope() { SetWaitHook(nullptr, nullptr); }
};
}  // namespace

Recovery::Recovery(MPI_Comm comm, Mode mode, int argc, char** argv) : impl_(new Impl) {
  impl_->mode = mode;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  impl_->exe = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argc > 0 ? argv[0] : "");
  for (int i = 1; i < argc; ++i) impl_->args.emplace_back(argv[i]);
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) {
    // A replacement: join the survivors in the place of a dead rank.
    std::vector<int> info;
    impl_->comm = impl_->Merge(parent, true, &info, 0);
    impl_->recoveries = info.empty() ? 1 : info[0];
    impl_->replacement = true;
  } else {
    CheckRc(MPI_Comm_dup(comm, &impl_->comm), "MPI_Comm_dup");
  }
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  impl_->OpenDetector();
}

Recovery::~Recovery() = default;

MPI_Comm Recovery::comm() const { return impl_->comm; }
bool Recovery::replacement() const { return impl_->replacement; }
int Recovery::recoveries() const { return impl_->recoveries; }
double Recovery::last_recovery_seconds() const { return impl_->last_seconds; }
void Recovery::wait(MPI_Request* req, MPI_Status* status) { impl_->WaitAll(1, req, status); }
void Recovery::wait_all(int n, MPI_Request* reqs, MPI_Status* statuses) { impl_->WaitAll(n, reqs, statuses); }
void Recovery::check() { impl_->Check(); }

void* Recovery::zone_alloc(size_t bytes) {
  impl_->zone_bufs.emplace_back(new char[bytes > 0 ? bytes : 1]());
  return impl_->zone_bufs.back().get();
}

void Recovery::finalize_and_exit(int status) {
  if (impl_->recoveries == 0) {
    MPI_Finalize();
    std::exit(status);
  }
  MPI_Request rq;
  if (MPI_Ibarrier(impl_->comm, &rq) == MPI_SUCCESS) {
    try {
      impl_->WaitAll(1, &rq, MPI_STATUSES_IGNORE);
    } catch (const PeerFailed& e) {
      std::fprintf(stderr, "%s while finishing; exiting anyway\n", e.what());
    }
  }
  std::fflush(nullptr);
  _exit(status);
}

void Recovery::run(const std::function<void(MPI_Comm)>& body) {
  for (;;) {
    try {
      HookScope hook(impl_.get());
      body(impl_->comm);
      impl_->zone_bufs.clear();
      return;
    } catch (const PeerFailed& e) {
      for (auto& b : impl_->zone_bufs) (void)b.release();  // abandoned: MPI may still write there
      impl_->zone_bufs.clear();
      int r = 0;
      MPI_Comm_rank(impl_->comm, &r);
      std::fprintf(stderr, "%s on rank %d; recovering\n", e.what(), r);
    }
    impl_->Recover();
  }
}

}  // namespace revive::mpi
