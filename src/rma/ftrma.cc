// librevive_rma: fault tolerance for MPI-3 one-sided programs (ftRMA, ../shared/papers/
// ftrma-fault-tolerance-rma.txt), as a PMPI interposition library for unmodified programs (preloaded or
// linked). This file is the library: the MPI_* wrappers and the state behind them. docs/rma.md describes
// the design; placement.h, xor_code.h and access_log.h hold the parts that need no MPI.
//
// What happens where:
//  - every put-like access (Put, Accumulate, and the update of Get_accumulate, Fetch_and_op,
//    Compare_and_swap) is logged at its origin, per target, before it is issued (LP_p[q], section 3.2.3);
//  - every get-like access is logged at its target in two phases (Algorithm 1): the determinant in Q_p when
//    issued, the record with its data in the target's log window (LG_q) once the program closes the epoch;
//    N_q[p] is set at the target while a get of p's is issued but not yet logged;
//  - the order counters EC, GC, SC, GNC (section 4.1) go into every record;
//  - coordinated checkpoints are taken in memory: after a fence (the "Gsync" scheme) or at a barrier of
//    the program's (the "Locks" scheme, after a flush of every passive-target window), when Daly's
//    interval has passed or a rank's logs pass the configured limit (demand checkpoint). Each rank keeps a
//    copy of its window and one part of its checksum group's XOR parity; then every log is trimmed.
//
// Wrappers never throw; errors of MPI are returned to the program unchanged. The library's own
// collectives run on a duplicate of MPI_COMM_WORLD so they can never match one of the program's.
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/resilience.h"
#include "rma/access_log.h"
#include "rma/loss_verdict.h"
#include "rma/placement.h"
#include "rma/rank_watch.h"
#include "rma/xor_code.h"

namespace revive::rma {
namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char* Env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : nullptr;
}

// ---- Configuration (environment; docs/rma.md "Settings") -------------------------------------------
struct Config {
  bool enabled = true;         // REVIVE_RMA=0: pass everything through
  bool checkpoints = true;     // REVIVE_RMA_CKPT=0: log only
  int group = 4;               // REVIVE_RMA_GROUP
  int level = 0;               // REVIVE_RMA_TAWARE=none|host|rack
  double interval = 0;         // REVIVE_RMA_INTERVAL=S (0: Daly's, from REVIVE_RMA_MTBF)
  double mtbf = 3600;          // REVIVE_RMA_MTBF=S
  size_t log_limit = 64 << 20;  // REVIVE_RMA_LOG_LIMIT=bytes: demand checkpoint above it
  size_t lg_bytes = 16 << 20;  // REVIVE_RMA_LG_BYTES: each rank's log window for others' gets
  bool verify = false;         // REVIVE_RMA_VERIFY=1: rebuild every member after every checkpoint
  int verify_flip = -1;        // REVIVE_RMA_VERIFY_FLIP=rank: that rank damages its parity (tests)
  // REVIVE_RMA_TEST_DIE=rank:ckpt:phase (tests only): that rank SIGKILLs itself inside its ckpt-th
  // checkpoint, phase 0 after writing its new copy and before the parity exchange, 1 after the exchange
  // and before the last barrier: a death inside a checkpoint on demand, not by luck.
  int die_rank = -1, die_phase = 0;
  uint64_t die_ckpt = 0;
  bool stats = false;          // REVIVE_RMA_STATS=1
  bool watch = true;           // REVIVE_RMA_WATCH=0: no failure detection (survivors of a death hang)
  std::string host, racks;     // REVIVE_RMA_HOST, REVIVE_RMA_RACKS=host=rack,...
};

Config ReadConfig() {
  Config c;
  if (const char* v = Env("REVIVE_RMA")) c.enabled = strcmp(v, "0") != 0;
  if (const char* v = Env("REVIVE_RMA_CKPT")) c.checkpoints = strcmp(v, "0") != 0;
  if (const char* v = Env("REVIVE_RMA_GROUP")) c.group = std::max(2, atoi(v));
  if (const char* v = Env("REVIVE_RMA_TAWARE"))
    c.level = !strcmp(v, "none") ? -1 : !strcmp(v, "rack") ? 1 : 0;
  if (const char* v = Env("REVIVE_RMA_INTERVAL")) c.interval = atof(v);
  if (const char* v = Env("REVIVE_RMA_MTBF")) c.mtbf = std::max(1e-3, atof(v));
  if (const char* v = Env("REVIVE_RMA_LOG_LIMIT")) c.log_limit = strtoull(v, nullptr, 10);
  if (const char* v = Env("REVIVE_RMA_LG_BYTES")) c.lg_bytes = std::max<size_t>(4096, strtoull(v, nullptr, 10));
  if (const char* v = Env("REVIVE_RMA_VERIFY")) c.verify = strcmp(v, "0") != 0;
  if (const char* v = Env("REVIVE_RMA_VERIFY_FLIP")) c.verify_flip = atoi(v);
  if (const char* v = Env("REVIVE_RMA_TEST_DIE"))
    if (sscanf(v, "%d:%" SCNu64 ":%d", &c.die_rank, &c.die_ckpt, &c.die_phase) != 3) c.die_rank = -1;
  if (const char* v = Env("REVIVE_RMA_STATS")) c.stats = strcmp(v, "0") != 0;
  if (const char* v = Env("REVIVE_RMA_WATCH")) c.watch = strcmp(v, "0") != 0;
  if (const char* v = Env("REVIVE_RMA_HOST")) c.host = v;
  if (const char* v = Env("REVIVE_RMA_RACKS")) c.racks = v;
  if (c.host.empty()) {
    char h[256] = {0};
    gethostname(h, sizeof h - 1);
    c.host = h;
  }
  return c;
}

// ---- Datatypes and ops as indices (records cross processes; handles do not) --------------------------
std::vector<MPI_Datatype>& BasicTypes() {
  static std::vector<MPI_Datatype> t;
  if (t.empty())
    t = {MPI_BYTE, MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT,
         MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG, MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT,
         MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T,
         MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T, MPI_C_BOOL, MPI_AINT, MPI_OFFSET, MPI_WCHAR};
  return t;
}
std::vector<MPI_Op>& Ops() {
  static std::vector<MPI_Op> o;
  if (o.empty())
    o = {MPI_REPLACE, MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN,   MPI_BAND,   MPI_BOR,
         MPI_BXOR,    MPI_LAND, MPI_LOR, MPI_LXOR, MPI_NO_OP, MPI_MAXLOC, MPI_MINLOC};
  return o;
}
constexpr uint8_t kUnknownType = 255;

// The element type of `t` (named, or contiguous of named): index+1 into BasicTypes(); kUnknownType else.
uint8_t BasicOf(MPI_Datatype t) {
  for (int depth = 0; depth < 4; ++depth) {
    auto& bt = BasicTypes();
    for (size_t i = 0; i < bt.size(); ++i)
      if (bt[i] == t) return static_cast<uint8_t>(i + 1);
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb != MPI_COMBINER_CONTIGUOUS ||
        nd != 1 || ni != 1)
      return kUnknownType;
    int count;
    MPI_Datatype inner;
    PMPI_Type_get_contents(t, 1, 0, 1, &count, nullptr, &inner);
    t = inner;  // a named type from get_contents needs no free
  }
  return kUnknownType;
}
uint16_t OpIndex(MPI_Op op) {
  auto& o = Ops();
  for (size_t i = 0; i < o.size(); ++i)
    if (o[i] == op) return static_cast<uint16_t>(i);
  return 0xffff;
}

// What logging needs to know of a datatype: its size, whether `count` of it lie dense from offset 0 (so a
// byte range describes the memory an access touches), and its element type.
struct TypeInfo {
  size_t size = 0;
  bool dense = false;
  uint8_t basic = kUnknownType;
};

TypeInfo SlowInfo(MPI_Datatype t) {
  TypeInfo i;
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_size(t, &size);
  PMPI_Type_get_true_extent(t, &lb, &extent);
  i.size = static_cast<size_t>(size);
  i.dense = lb == 0 && extent == size;
  i.basic = BasicOf(t);
  return i;
}

// Predefined types are looked up in a table made once (their handles never change): three MPI queries
// and a scan per access were a third of what logging cost a hash table doing millions of small atomics.
// Derived types are asked each time (a freed handle can come back as another type).
struct TypeCache {
  std::vector<MPI_Datatype> types;
  std::vector<TypeInfo> info;
  size_t last = 0;
};
TypeCache* g_types = nullptr;

TypeInfo Info(MPI_Datatype t) {
  if (!g_types) {
    g_types = new TypeCache;
    g_types->types = BasicTypes();
    for (MPI_Datatype b : g_types->types) g_types->info.push_back(SlowInfo(b));
  }
  TypeCache& c = *g_types;
  if (c.types[c.last] == t) return c.info[c.last];
  for (size_t i = 0; i < c.types.size(); ++i)
    if (c.types[i] == t) {
      c.last = i;
      return c.info[i];
    }
  return SlowInfo(t);
}

bool DenseBytes(int count, MPI_Datatype t, size_t* bytes) {
  const TypeInfo i = Info(t);
  *bytes = i.size * static_cast<size_t>(count);
  return i.dense;
}

// Copies count×t from `buf` (the origin's layout) into out (packed).
void PackInto(const void* buf, int count, MPI_Datatype t, uint8_t* out, size_t bytes) {
  size_t b;
  if (DenseBytes(count, t, &b)) {
    std::memcpy(out, buf, bytes);
    return;
  }
  int pos = 0;
  PMPI_Pack(buf, count, t, out, static_cast<int>(bytes), &pos, MPI_COMM_SELF);
}

// ---- State -----------------------------------------------------------------------------------------
// The log window every rank exposes: others' gets are logged into it (LG), and it holds the counters and
// flags others set remotely.
// After the header, LG_q is cut into one slice per origin (LG_q[p], the paper's structure): only p appends
// to its slice, so it keeps its own offset and an append is one MPI_Put, with no remote fetch-and-add to
// reserve space (that round trip cost a get-heavy hash table a quarter of its run time). Each append ends
// with an 8-byte zero word (a record header of kind 0), which is where a reader of the slice stops.
constexpr size_t kScOff = 8;            // uint64[kMaxWins]: SC per window id
constexpr uint32_t kMaxWins = 64;
constexpr size_t kNOff = kScOff + 8 * kMaxWins;  // uint8[world]: N_q[p]
// Then uint8[world]: 1 when p's get records did not fit its slice here since the last checkpoint (set by
// p, cleared by the owner at the checkpoint): the survivors' verdict on p's logs needs it (rank_watch.h).
size_t LostBase(int world_size) { return kNOff + static_cast<size_t>(world_size); }

struct PendingGet {
  Determinant det;
  void* buf;
  int count;
  MPI_Datatype type;
};

struct Win {
  MPI_Win win = MPI_WIN_NULL;
  uint32_t id = 0;
  uint8_t* base = nullptr;
  size_t size = 0;
  int disp_unit = 1;
  int comm_size = 0, comm_rank = 0;
  std::vector<int> to_world;
  bool protect = false;  // its communicator is MPI_COMM_WORLD's group (XOR groups are over the world)
  bool used_fence = false;
  int lock_count = 0;  // LC_p (lock_all counts as one)
  int active = 0;      // PSCW epochs open (start and post)
  uint64_t ec = 0, gc = 0, gnc = 0, seq = 0;
  std::vector<uint64_t> sc;   // SC taken at each target in the current lock epoch (0: not taken)
  std::vector<LogBuffer> lp;  // LP_p[q], by comm rank q
  std::vector<PendingGet> q;  // Q_p
  std::vector<PendingGet> q_keep;                // scratch of FlushGets, kept to spare allocations
  std::vector<std::vector<uint8_t>> blobs;       // scratch: records per target
  std::vector<uint64_t> nrec;                    // scratch: record count per target
  std::vector<uint8_t> n_set; // N_q[p] set in this epoch, by target
  // Checkpoint: two generations (ckpt_buffers.h), published to the watcher
  WinCkpt* ck = nullptr;
  int pending = -1;  // the generation written by the checkpoint in progress, committed after its barrier
  size_t padded = 0;
  uint64_t checkpoints = 0;
  uint64_t fences_to_check = 1, check_every = 1;
  double last_check = 0;  // when this window's fences last asked (rank 0 measures the fence rate)
};

struct Stats {
  uint64_t puts = 0, put_bytes = 0, gets = 0, get_bytes = 0, unknown_layout = 0, lg_overflow = 0;
  uint64_t checkpoints = 0, gsync = 0, locks = 0, demand = 0, verified = 0, verify_bad = 0;
  double ckpt_seconds = 0;
  size_t max_log = 0;
};

struct State {
  bool ready = false;
  Config cfg;
  MPI_Comm comm = MPI_COMM_NULL;   // dup of MPI_COMM_WORLD
  MPI_Comm gcomm = MPI_COMM_NULL;  // this rank's checksum group
  int rank = 0, size = 1, grank = 0, gsize = 1, group = -1;
  Placement placement;
  WatchState* watch = nullptr;  // published for the watcher thread
  RankWatch* watcher = nullptr;
  MPI_Win logwin = MPI_WIN_NULL;
  uint8_t* logbase = nullptr;
  size_t hdr = 0, lg_cap = 0, slice = 0;
  std::vector<uint64_t> lg_off;    // my fill of LG_q[me] at every rank q
  std::vector<uint64_t> lg_count;  // records I appended there since the last trim
  std::vector<Win*> wins;
  uint32_t next_id = 1;
  double last_ckpt = 0, ckpt_cost = 0;
  Stats st;
};

State* g = nullptr;

Win* Find(MPI_Win w) {
  if (!g) return nullptr;
  for (Win* x : g->wins)
    if (x->win == w) return x;
  return nullptr;
}

size_t LogBytes() {
  size_t n = 0;
  for (Win* w : g->wins)
    for (auto& l : w->lp) n += l.bytes();
  for (uint64_t o : g->lg_off) n += o;  // what we logged at our targets (each origin judges its own)
  return n;
}

void Warn(const char* fmt, const char* what) {
  std::fprintf(stderr, "revive-rma: rank %d: ", g ? g->rank : -1);
  std::fprintf(stderr, fmt, what);
  std::fputc('\n', stderr);
}

// ---- Set-up ------------------------------------------------------------------------------------------
void Setup() {
  g = new State;
  g->cfg = ReadConfig();
  if (!g->cfg.enabled) return;
  PMPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
  PMPI_Comm_rank(g->comm, &g->rank);
  PMPI_Comm_size(g->comm, &g->size);
  // Failure domains: host, then rack (REVIVE_RMA_RACKS maps hosts to racks; an unmapped host is its rack).
  std::string rack = g->cfg.host;
  for (size_t at = 0; at < g->cfg.racks.size();) {
    size_t end = g->cfg.racks.find(',', at);
    if (end == std::string::npos) end = g->cfg.racks.size();
    std::string e = g->cfg.racks.substr(at, end - at);
    size_t eq = e.find('=');
    if (eq != std::string::npos && e.substr(0, eq) == g->cfg.host) rack = e.substr(eq + 1);
    at = end + 1;
  }
  char mine[2][128] = {{0}};
  snprintf(mine[0], sizeof mine[0], "%s", g->cfg.host.c_str());
  snprintf(mine[1], sizeof mine[1], "%s", rack.c_str());
  std::vector<char> all(static_cast<size_t>(g->size) * sizeof mine);
  PMPI_Allgather(mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, g->comm);
  std::vector<std::string> domains(g->size);
  for (int r = 0; r < g->size; ++r) {
    const char* p = all.data() + r * sizeof mine;
    domains[r] = std::string(p + 128) + "/" + std::string(p);  // rack/host
  }
  g->placement = PlaceGroups(domains, g->cfg.group, g->cfg.level);
  if (g->rank == 0 && !g->placement.warning.empty())
    std::fprintf(stderr, "revive-rma: checksum groups: %s\n", g->placement.warning.c_str());
  g->group = g->size >= 2 ? g->placement.group_of[g->rank] : -1;
  PMPI_Comm_split(g->comm, g->group < 0 ? MPI_UNDEFINED : g->group, g->rank, &g->gcomm);
  if (g->gcomm != MPI_COMM_NULL) {
    PMPI_Comm_rank(g->gcomm, &g->grank);
    PMPI_Comm_size(g->gcomm, &g->gsize);
  }
  // The log window: header (tail, SC per window, N flags) then records.
  g->hdr = (LostBase(g->size) + static_cast<size_t>(g->size) + 63) & ~size_t{63};
  g->lg_cap = g->cfg.lg_bytes;
  g->slice = (g->lg_cap / static_cast<size_t>(g->size)) & ~size_t{63};  // MPICH wants 16-byte multiples
  g->lg_cap = g->slice * static_cast<size_t>(g->size);
  g->lg_off.assign(g->size, 0);
  g->lg_count.assign(g->size, 0);
  PMPI_Win_allocate(static_cast<MPI_Aint>(g->hdr + g->lg_cap), 1, MPI_INFO_NULL, g->comm, &g->logbase, &g->logwin);
  std::memset(g->logbase, 0, g->hdr + g->lg_cap);
  PMPI_Win_lock_all(0, g->logwin);
  g->watch = new WatchState(g->size);
  g->watch->n_flags = g->logbase + kNOff;
  g->watch->lost_flags = g->logbase + LostBase(g->size);
  g->watch->epoch_time.store(Now());
  if (g->cfg.watch) {
    std::string err;
    g->watcher = RankWatch::Start(g->comm, g->placement.groups, g->watch, &err);
    if (!g->watcher) Warn("no failure detection (a rank's death will hang the others): %s", err.c_str());
  }
  PMPI_Barrier(g->comm);
  g->last_ckpt = Now();
  g->ready = true;
  if (g->rank == 0 && g->cfg.stats)
    std::fprintf(stderr, "revive-rma: %d ranks in %zu checksum groups (level %s)\n", g->size,
                 g->placement.groups.size(), g->cfg.level < 0 ? "none" : g->cfg.level == 0 ? "host" : "rack");
}

// ---- Logging -----------------------------------------------------------------------------------------
Determinant MakeDet(Win* w, Kind k, int target, MPI_Aint disp, size_t len, uint8_t basic, uint16_t op) {
  Determinant d;
  d.kind = static_cast<uint8_t>(k);
  d.basic = basic;
  d.op = op;
  d.win = w->id;
  d.origin = w->comm_rank;
  d.target = target;
  d.disp = static_cast<uint64_t>(disp) * static_cast<uint64_t>(w->disp_unit);
  d.len = len;
  d.ec = w->ec;
  d.gc = w->gc;
  d.sc = target >= 0 && target < static_cast<int>(w->sc.size()) ? w->sc[target] : 0;
  d.gnc = w->gnc;
  d.seq = ++w->seq;
  return d;
}

// In a lock epoch, SC_q is fetched and incremented at the target at the first access to it (section 4.1 C).
void TakeSc(Win* w, int target) {
  if (w->lock_count == 0 || w->sc[target] != 0) return;
  const uint64_t one = 1;
  uint64_t old = 0;
  const int t = w->to_world[target];
  PMPI_Fetch_and_op(&one, &old, MPI_UINT64_T, t, kScOff + 8 * (w->id % kMaxWins), MPI_SUM, g->logwin);
  PMPI_Win_flush(t, g->logwin);
  w->sc[target] = old + 1;
}

// A put-like access, logged at its origin before it is issued.
void LogPut(Win* w, Kind k, const void* obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
            int tcount, MPI_Datatype ttype, MPI_Op op, const void* compare) {
  if (target == w->comm_rank || target < 0 || target >= w->comm_size) return;  // our own window: redone by us
  TakeSc(w, target);
  size_t tbytes = 0, obytes = 0;
  const TypeInfo ti = Info(ttype);
  const bool dense = ti.dense;
  tbytes = ti.size * static_cast<size_t>(tcount);
  DenseBytes(ocount, otype, &obytes);
  uint8_t basic = ti.basic;
  if (!dense) {
    basic = kUnknownType;
    g->watch->put_gaps[w->to_world[target]].fetch_or(kGapPutLayout, std::memory_order_relaxed);
    if (g->st.unknown_layout++ == 0)
      Warn("%s", "an access to a non-contiguous target datatype is logged without its layout: recovery of its "
                 "target falls back to the last coordinated checkpoint");
  }
  const size_t len = std::min(obytes, tbytes ? tbytes : obytes);
  Determinant d = MakeDet(w, k, target, disp, len, basic, k == Kind::kAcc ? OpIndex(op) : 0);
  uint8_t* data = w->lp[target].Append(d);
  if (len) PackInto(obuf, ocount, otype, data, len);
  if (k == Kind::kCas && compare) std::memcpy(data + len, compare, len);
  g->st.puts++;
  g->st.put_bytes += len;
}

// Phase 1 of a get (Algorithm 1, lines 1-3): N_q[p] := true, the determinant into Q_p.
void LogGetIssue(Win* w, void* buf, int count, MPI_Datatype type, int target, MPI_Aint disp) {
  if (target == w->comm_rank || target < 0 || target >= w->comm_size) return;
  TakeSc(w, target);
  if (!w->n_set[target]) {
    const uint8_t one = 1;
    PMPI_Accumulate(&one, 1, MPI_BYTE, w->to_world[target], kNOff + g->rank, 1, MPI_BYTE, MPI_REPLACE, g->logwin);
    w->n_set[target] = 1;
  }
  const TypeInfo ti = Info(type);
  w->q.push_back(PendingGet{MakeDet(w, Kind::kGet, target, disp, ti.size * static_cast<size_t>(count), ti.basic, 0),
                            buf, count, type});
}

// Phase 2 (lines 4-8), once the epoch of the gets to `target` (-1: every target) has closed: the records
// with their data appended to the targets' LG, then N_q[p] := false.
// Completes the log appends at every target that got one. One MPI_Win_flush per target, not
// MPI_Win_flush_all: Open MPI 4.1's osc ucx returned from flush_all with appends still not in the
// target's memory (the get-log check of REVIVE_RMA_VERIFY found slices empty; osc pt2pt and MPICH were
// right), and MPICH 4.0.2's flush_all does not complete gets (tests/rma/apps/dht.c).
void FlushTargets(Win* w, const std::vector<std::vector<uint8_t>>& blobs) {
  for (int t = 0; t < w->comm_size; ++t)
    if (!blobs[t].empty()) PMPI_Win_flush(w->to_world[t], g->logwin);
}

void FlushGets(Win* w, int target) {
  if (w->q.empty()) return;
  auto& blobs = w->blobs;
  auto& nrec = w->nrec;
  auto& keep = w->q_keep;
  blobs.resize(w->comm_size);
  for (auto& b : blobs) b.clear();
  nrec.assign(w->comm_size, 0);
  keep.clear();
  for (auto& pg : w->q) {
    if (target >= 0 && pg.det.target != target) {
      keep.push_back(pg);
      continue;
    }
    auto& b = blobs[pg.det.target];
    nrec[pg.det.target]++;
    const size_t at = b.size();
    b.resize(at + RecordBytes(pg.det));
    std::memcpy(b.data() + at, &pg.det, sizeof pg.det);
    if (pg.det.len) PackInto(pg.buf, pg.count, pg.type, b.data() + at + sizeof pg.det, pg.det.len);
    g->st.gets++;
    g->st.get_bytes += pg.det.len;
  }
  w->q.swap(keep);
  const uint8_t zero = 0;
  for (int t = 0; t < w->comm_size; ++t) {
    if (blobs[t].empty()) continue;
    const int wt = w->to_world[t];
    const size_t len = blobs[t].size();
    blobs[t].resize(len + 8, 0);  // the terminator
    if (g->lg_off[wt] + len + 8 <= g->slice) {
      PMPI_Put(blobs[t].data(), static_cast<int>(len + 8), MPI_BYTE, wt,
               static_cast<MPI_Aint>(g->hdr + static_cast<size_t>(g->rank) * g->slice + g->lg_off[wt]),
               static_cast<int>(len + 8), MPI_BYTE, g->logwin);
      g->lg_off[wt] += len;
      g->lg_count[wt] += nrec[t];
    } else {
      g->st.lg_overflow++;  // my slice at that target is full: a demand checkpoint follows at the next sync point
      const uint8_t one = 1;  // and the target knows my log there is incomplete (the survivors' verdict)
      PMPI_Accumulate(&one, 1, MPI_BYTE, wt, LostBase(g->size) + g->rank, 1, MPI_BYTE, MPI_REPLACE, g->logwin);
    }
    PMPI_Accumulate(&zero, 1, MPI_BYTE, wt, kNOff + g->rank, 1, MPI_BYTE, MPI_REPLACE, g->logwin);
    w->n_set[t] = 0;
  }
  FlushTargets(w, blobs);
}

// An epoch (towards `target`, or all) has closed: EC and GC advance, and the gets of it are logged.
void CloseEpoch(Win* w, int target) {
  w->ec++;
  w->gc++;
  FlushGets(w, target);
  g->st.max_log = std::max(g->st.max_log, LogBytes());
}

// ---- Checkpoints -------------------------------------------------------------------------------------
void TrimLogs() {
  for (Win* w : g->wins)
    for (auto& l : w->lp) l.Clear();
  // Every slice of my own LG starts with a terminator again, so nothing of before the checkpoint is read
  // as a log of after it. Written locally: every rank is inside the checkpoint, nobody appends meanwhile.
  for (int p = 0; p < g->size; ++p) std::memset(g->logbase + g->hdr + static_cast<size_t>(p) * g->slice, 0, 8);
  std::memset(g->logbase + LostBase(g->size), 0, static_cast<size_t>(g->size));
  for (int p = 0; p < g->size; ++p) g->watch->put_gaps[p].store(0, std::memory_order_relaxed);
  PMPI_Win_sync(g->logwin);
  std::fill(g->lg_off.begin(), g->lg_off.end(), 0);
  std::fill(g->lg_count.begin(), g->lg_count.end(), 0);
}

// Rebuilds every member of the group from the others (one MPI_Reduce per member) and compares with its
// copy: the parity is proved able to restore any one member, not assumed.
void Verify(Win* w, const CkptGen& gen) {
  if (g->gcomm == MPI_COMM_NULL) return;
  const int k = g->gsize;
  const size_t c = ChunkBytes(w->padded, k);
  std::vector<uint8_t> contrib((k - 1) * c), rebuilt((k - 1) * c);
  uint64_t bad = 0;
  for (int f = 0; f < k; ++f) {
    if (f == g->grank)
      std::fill(contrib.begin(), contrib.end(), 0);
    else
      RebuildContribution(gen.copy.data(), w->padded, gen.parity.data(), k, g->grank, f, contrib.data());
    PMPI_Reduce(contrib.data(), rebuilt.data(), static_cast<int>(contrib.size()), MPI_BYTE, MPI_BXOR, f, g->gcomm);
    if (f == g->grank) {
      if (std::memcmp(rebuilt.data(), gen.copy.data(), w->padded) != 0) {
        size_t at = 0;
        while (rebuilt[at] == gen.copy[at]) ++at;
        std::fprintf(stderr,
                     "revive-rma: rank %d: verify: window %u checkpoint %" PRIu64
                     ": the copy rebuilt from checksum group %d differs at byte %zu\n",
                     g->rank, w->id, w->checkpoints, g->group, at);
        bad++;
      }
    }
  }
  g->st.verified++;
  g->st.verify_bad += bad;
}

// Every origin's slice of my LG holds exactly the get records that origin says it appended since the
// last trim, all of them gets aimed at me: the logs a recovery would read are checked, not assumed.
void VerifyGetLogs() {
  std::vector<uint64_t> expect(g->size, 0);
  PMPI_Alltoall(g->lg_count.data(), 1, MPI_UINT64_T, expect.data(), 1, MPI_UINT64_T, g->comm);
  PMPI_Win_sync(g->logwin);
  for (int p = 0; p < g->size; ++p) {
    const uint8_t* slice = g->logbase + g->hdr + static_cast<size_t>(p) * g->slice;
    std::vector<RecordView> recs;
    std::string err;
    bool ok = ParseRecords(slice, g->slice, &recs, &err);
    size_t gets = 0;
    for (const auto& r : recs) gets += r.det.kind == static_cast<uint8_t>(Kind::kGet);
    if (!ok || recs.size() != expect[p] || gets != recs.size()) {
      std::fprintf(stderr,
                   "revive-rma: rank %d: verify: the log of rank %d's gets holds %zu records (%zu gets), rank %d "
                   "appended %" PRIu64 "%s%s\n",
                   g->rank, p, recs.size(), gets, p, expect[p], ok ? "" : "; ", ok ? "" : err.c_str());
      g->st.verify_bad++;
    }
  }
}

// The test hook REVIVE_RMA_TEST_DIE. With REVIVE_RMA_REBUILD_DIR set, the dying rank first leaves its
// complete generations there (rank<r>.win<id>.ckpt<n>.dump), so the test compares the survivors' rebuild
// with the real copy byte for byte.
void TestDie(uint64_t ckpt, int phase) {
  if (g->cfg.die_rank != g->rank || g->cfg.die_ckpt != ckpt || g->cfg.die_phase != phase) return;
  const char* dir = Env("REVIVE_RMA_REBUILD_DIR");
  for (Win* w : g->wins)
    for (int i = 0; dir && w->ck && i < 2; ++i) {
      const CkptGen& gen = w->ck->gen[i];
      if (!gen.complete.load()) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/rank%d.win%u.ckpt%" PRIu64 ".dump", dir, g->rank, w->id, gen.ckpt.load());
      if (FILE* f = fopen(path, "wb")) {
        fwrite(gen.copy.data(), 1, gen.copy.size(), f);
        fclose(f);
      }
    }
  raise(SIGKILL);
}

// Writes the generation that is not committed (ckpt_buffers.h): the committed one stays whole whatever
// happens until SyncPoint commits this one after the checkpoint's last barrier.
void Checkpoint(Win* w) {
  const double t0 = Now();
  WinCkpt* ck = w->ck;
  w->pending = ck->Next();
  CkptGen& gen = ck->gen[w->pending];
  gen.complete.store(false);
  gen.ckpt.store(w->checkpoints + 1);
  std::memcpy(gen.copy.data(), w->base, w->size);
  TestDie(w->checkpoints + 1, 0);
  if (g->gcomm != MPI_COMM_NULL) {
    const int k = g->gsize;
    const size_t c = ChunkBytes(w->padded, k);
    // Each block: the parity chunk, then every member's MemberMeta (what a rebuild of it is checked
    // against, and the counters it would resume from), each written by its member only and zero in the
    // others' blocks: the XOR hands every member all of them, in the same collective as the parity (a
    // separate allgather cost a collective per checkpoint, which hurt on an oversubscribed machine).
    const size_t meta = static_cast<size_t>(k) * sizeof(MemberMeta), block = c + meta;
    std::vector<uint8_t> contrib(static_cast<size_t>(k) * block);
    ParityContribution(gen.copy.data(), w->padded, k, g->grank, contrib.data(), block);
    const MemberMeta me{Checksum64(gen.copy.data(), w->padded), w->ec, w->gc, w->gnc, w->seq};
    for (int j = 0; j < k; ++j) {
      uint8_t* m = contrib.data() + static_cast<size_t>(j) * block + c;
      std::memset(m, 0, meta);
      std::memcpy(m + static_cast<size_t>(g->grank) * sizeof me, &me, sizeof me);
    }
    PMPI_Reduce_scatter_block(contrib.data(), gen.parity.data(), static_cast<int>(block), MPI_BYTE, MPI_BXOR, g->gcomm);
    std::memcpy(gen.meta.data(), gen.parity.data() + c, meta);
    if (g->cfg.verify_flip == g->rank && !gen.parity.empty()) gen.parity[0] ^= 0x5a;
  }
  gen.complete.store(true);
  TestDie(w->checkpoints + 1, 1);
  w->checkpoints++;
  if (g->cfg.verify) Verify(w, gen);
  g->st.checkpoints++;
  g->st.ckpt_seconds += Now() - t0;
}

// A sync point where a coordinated checkpoint is consistent. `fence`: after a fence of w (the Gsync
// scheme; only w is saved); else at a barrier of the program's (the Locks scheme; every passive-target
// window is flushed first). Every rank reaches the same sync points in the same order, so they agree
// with one allreduce on whether to checkpoint (Daly's interval on rank 0's clock, or a rank's logs over
// the limit) and how often to ask next time.
constexpr double kCheckPeriod = 0.1;  // seconds between two questions at fences

bool SyncPoint(Win* fw) {
  if (!g->cfg.checkpoints) return false;  // log only: nothing to decide
  const double now = Now();
  const bool demand = LogBytes() > g->cfg.log_limit || g->st.lg_overflow > 0;
  int64_t in[4] = {0, demand ? 1 : 0, 0, static_cast<int64_t>(g->ckpt_cost * 1e9)};
  if (g->rank == 0) {
    double interval = g->cfg.interval;
    if (interval <= 0) interval = revive::resilience::DalyInterval(std::max(g->ckpt_cost, 1e-4), g->cfg.mtbf);
    // The first sync point takes the first checkpoint: without one there is nothing to recover from.
    const bool first = g->st.checkpoints == 0;
    in[0] = (first || now - g->last_ckpt >= interval) ? 1 : 0;
    if (fw) {
      // Ask about every 100 ms of fences (one small allreduce), so a code with a fence per microsecond
      // does not pay one per fence (with 4 ranks on 2 cores under MPICH's busy polling, asking every
      // 20 ms cost an FFT-like transpose a third of its run time). The rate is the mean over the fences since the last question, and
      // the gap may at most double each time: fences often come in bursts (fence, puts, fence, then
      // computation), and the first gaps alone would say "thousands per second".
      const double gap = fw->last_check > 0 ? (now - fw->last_check) / static_cast<double>(fw->check_every) : kCheckPeriod;
      const int64_t grow = 2 * static_cast<int64_t>(fw->check_every);
      in[2] = std::clamp<int64_t>(static_cast<int64_t>(kCheckPeriod / std::max(gap, 1e-9)), 1, std::min<int64_t>(grow, 4096));
    }
  }
  int64_t out[4];
  PMPI_Allreduce(in, out, 4, MPI_INT64_T, MPI_MAX, g->comm);
  if (fw) {
    fw->check_every = std::max<int64_t>(1, out[2]);
    fw->last_check = now;
  }
  if (!out[0] && !out[1]) return false;
  const double t0 = Now();
  g->watch->in_checkpoint.store(true);
  bool any = false;
  for (Win* w : g->wins) {
    if (!w->protect) continue;
    if (fw ? w != fw : (w->used_fence || w->active)) continue;
    Checkpoint(w);
    any = true;
  }
  if (!any) {
    g->watch->in_checkpoint.store(false);
    return false;
  }
  if (g->cfg.verify) VerifyGetLogs();
  TrimLogs();
  PMPI_Barrier(g->comm);  // nobody logs into an LG before its owner has trimmed it
  // Every rank has passed its parity exchanges: the new generation is complete everywhere, commit it.
  for (Win* w : g->wins)
    if (w->pending >= 0) {
      w->ck->current.store(w->pending);
      w->pending = -1;
    }
  g->watch->epoch.fetch_add(1);
  g->watch->epoch_time.store(Now());
  g->watch->in_checkpoint.store(false);
  g->ckpt_cost = Now() - t0;
  g->last_ckpt = Now();
  if (out[1] && !out[0]) g->st.demand++;
  (fw ? g->st.gsync : g->st.locks)++;
  g->st.lg_overflow = 0;
  return true;
}

Win* Register(MPI_Win win, void* base, MPI_Aint size, int disp_unit, MPI_Comm comm) {
  auto* w = new Win;
  w->win = win;
  w->id = g->next_id++;
  w->base = static_cast<uint8_t*>(base);
  w->size = static_cast<size_t>(size);
  w->disp_unit = disp_unit;
  PMPI_Comm_size(comm, &w->comm_size);
  PMPI_Comm_rank(comm, &w->comm_rank);
  MPI_Group cg, wg;
  PMPI_Comm_group(comm, &cg);
  PMPI_Comm_group(g->comm, &wg);
  std::vector<int> mine(w->comm_size);
  for (int i = 0; i < w->comm_size; ++i) mine[i] = i;
  w->to_world.resize(w->comm_size);
  PMPI_Group_translate_ranks(cg, w->comm_size, mine.data(), wg, w->to_world.data());
  PMPI_Group_free(&cg);
  PMPI_Group_free(&wg);
  w->protect = w->comm_size == g->size;
  w->sc.assign(w->comm_size, 0);
  w->lp.resize(w->comm_size);
  w->n_set.assign(w->comm_size, 0);
  if (!w->protect) g->watch->unprotected.store(true);
  if (!w->protect && g->rank == 0)
    Warn("%s", "a window on a communicator smaller than MPI_COMM_WORLD is logged but not checkpointed");
  if (w->protect) {
    // Every member's copy is padded to the largest window of the group so the parity covers them all.
    uint64_t mx = w->size, out = 0;
    PMPI_Allreduce(&mx, &out, 1, MPI_UINT64_T, MPI_MAX, g->comm);
    w->padded = std::max<size_t>(out, 1);
    w->ck = new WinCkpt;
    w->ck->id = w->id;
    w->ck->size = w->size;
    w->ck->padded = w->padded;
    const int k = std::max(g->gsize, 2);
    for (CkptGen& gen : w->ck->gen) {
      gen.copy.assign(w->padded, 0);
      // The parity chunk, then the group's MemberMeta (Checkpoint).
      gen.parity.assign(ChunkBytes(w->padded, k) + static_cast<size_t>(g->gsize) * sizeof(MemberMeta), 0);
      gen.meta.assign(static_cast<size_t>(g->gsize), MemberMeta{});
    }
    g->watch->Publish(w->ck);
  }
  g->wins.push_back(w);
  return w;
}

void Unregister(MPI_Win win) {
  for (size_t i = 0; i < g->wins.size(); ++i)
    if (g->wins[i]->win == win) {
      if (g->wins[i]->ck) {
        g->watch->Retire(g->wins[i]->ck);
        delete g->wins[i]->ck;
      }
      delete g->wins[i];
      g->wins.erase(g->wins.begin() + static_cast<long>(i));
      return;
    }
}

void Finish() {
  if (!g || !g->ready) return;
  if (g->cfg.stats || g->cfg.verify) {
    double local[2] = {static_cast<double>(g->st.max_log), g->st.ckpt_seconds}, mx[2];
    uint64_t sums[6] = {g->st.puts, g->st.gets, g->st.put_bytes + g->st.get_bytes, g->st.verified,
                        g->st.verify_bad, g->st.unknown_layout},
             tot[6];
    PMPI_Reduce(local, mx, 2, MPI_DOUBLE, MPI_MAX, 0, g->comm);
    PMPI_Reduce(sums, tot, 6, MPI_UINT64_T, MPI_SUM, 0, g->comm);
    if (g->rank == 0)
      std::fprintf(stderr,
                   "revive-rma: %" PRIu64 " checkpoints (%" PRIu64 " at fences, %" PRIu64 " at barriers, %" PRIu64
                   " on demand), %.3f s in checkpoints (slowest rank); logged %" PRIu64 " puts and %" PRIu64
                   " gets, %" PRIu64 " bytes, largest log %.0f bytes; %" PRIu64 " rebuilds verified, %" PRIu64
                   " failed; %" PRIu64 " accesses without a layout\n",
                   g->st.checkpoints, g->st.gsync, g->st.locks, g->st.demand, mx[1], tot[0], tot[1], tot[2], mx[0],
                   tot[3], tot[4], tot[5]);
  }
  if (g->watcher) {
    // Stop watching only when every rank is here, and close the mesh only when every rank has stopped:
    // a rank that closed its connections earlier would look dead to one still watching. (A death between
    // the two barriers is not seen: the survivors hang in the second, as without the library.)
    PMPI_Barrier(g->comm);
    g->watcher->Stop();
    PMPI_Barrier(g->comm);
    delete g->watcher;
    g->watcher = nullptr;
  }
  PMPI_Win_unlock_all(g->logwin);
  PMPI_Win_free(&g->logwin);
  if (g->gcomm != MPI_COMM_NULL) PMPI_Comm_free(&g->gcomm);
  PMPI_Comm_free(&g->comm);
  g->ready = false;
}

bool On() { return g && g->ready; }

}  // namespace
}  // namespace revive::rma

using namespace revive::rma;

// ---- The MPI interface ---------------------------------------------------------------------------------
extern "C" {

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) Setup();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) Setup();
  return rc;
}

int MPI_Finalize(void) {
  Finish();
  return PMPI_Finalize();
}

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  int rc = PMPI_Win_create(base, size, disp_unit, info, comm, win);
  if (rc == MPI_SUCCESS && On()) Register(*win, base, size, disp_unit, comm);
  return rc;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  int rc = PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
  if (rc == MPI_SUCCESS && On()) Register(*win, *static_cast<void**>(baseptr), size, disp_unit, comm);
  return rc;
}

int MPI_Win_free(MPI_Win* win) {
  if (On()) Unregister(*win);
  return PMPI_Win_free(win);
}

int MPI_Put(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
            MPI_Datatype ttype, MPI_Win win) {
  if (Win* w = Find(win)) LogPut(w, Kind::kPut, oaddr, ocount, otype, target, disp, tcount, ttype, MPI_REPLACE, nullptr);
  return PMPI_Put(oaddr, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Rput(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
             MPI_Datatype ttype, MPI_Win win, MPI_Request* req) {
  if (Win* w = Find(win)) LogPut(w, Kind::kPut, oaddr, ocount, otype, target, disp, tcount, ttype, MPI_REPLACE, nullptr);
  return PMPI_Rput(oaddr, ocount, otype, target, disp, tcount, ttype, win, req);
}

int MPI_Accumulate(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
                   MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
  if (Win* w = Find(win)) LogPut(w, Kind::kAcc, oaddr, ocount, otype, target, disp, tcount, ttype, op, nullptr);
  return PMPI_Accumulate(oaddr, ocount, otype, target, disp, tcount, ttype, op, win);
}

int MPI_Raccumulate(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
                    MPI_Datatype ttype, MPI_Op op, MPI_Win win, MPI_Request* req) {
  if (Win* w = Find(win)) LogPut(w, Kind::kAcc, oaddr, ocount, otype, target, disp, tcount, ttype, op, nullptr);
  return PMPI_Raccumulate(oaddr, ocount, otype, target, disp, tcount, ttype, op, win, req);
}

int MPI_Get(void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
            MPI_Datatype ttype, MPI_Win win) {
  if (Win* w = Find(win)) LogGetIssue(w, oaddr, ocount, otype, target, disp);
  return PMPI_Get(oaddr, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Rget(void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint disp, int tcount,
             MPI_Datatype ttype, MPI_Win win, MPI_Request* req) {
  if (Win* w = Find(win)) LogGetIssue(w, oaddr, ocount, otype, target, disp);
  return PMPI_Rget(oaddr, ocount, otype, target, disp, tcount, ttype, win, req);
}

int MPI_Get_accumulate(const void* oaddr, int ocount, MPI_Datatype otype, void* raddr, int rcount,
                       MPI_Datatype rtype, int target, MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op,
                       MPI_Win win) {
  if (Win* w = Find(win)) {
    if (op != MPI_NO_OP) LogPut(w, Kind::kAcc, oaddr, ocount, otype, target, disp, tcount, ttype, op, nullptr);
    LogGetIssue(w, raddr, rcount, rtype, target, disp);
  }
  return PMPI_Get_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount, ttype, op, win);
}

int MPI_Rget_accumulate(const void* oaddr, int ocount, MPI_Datatype otype, void* raddr, int rcount,
                        MPI_Datatype rtype, int target, MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op,
                        MPI_Win win, MPI_Request* req) {
  if (Win* w = Find(win)) {
    if (op != MPI_NO_OP) LogPut(w, Kind::kAcc, oaddr, ocount, otype, target, disp, tcount, ttype, op, nullptr);
    LogGetIssue(w, raddr, rcount, rtype, target, disp);
  }
  return PMPI_Rget_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, disp, tcount, ttype, op, win, req);
}

int MPI_Fetch_and_op(const void* oaddr, void* raddr, MPI_Datatype type, int target, MPI_Aint disp, MPI_Op op,
                     MPI_Win win) {
  if (Win* w = Find(win)) {
    if (op != MPI_NO_OP) LogPut(w, Kind::kAcc, oaddr, 1, type, target, disp, 1, type, op, nullptr);
    LogGetIssue(w, raddr, 1, type, target, disp);
  }
  return PMPI_Fetch_and_op(oaddr, raddr, type, target, disp, op, win);
}

int MPI_Compare_and_swap(const void* oaddr, const void* caddr, void* raddr, MPI_Datatype type, int target,
                         MPI_Aint disp, MPI_Win win) {
  if (Win* w = Find(win)) {
    LogPut(w, Kind::kCas, oaddr, 1, type, target, disp, 1, type, MPI_REPLACE, caddr);
    LogGetIssue(w, raddr, 1, type, target, disp);
  }
  return PMPI_Compare_and_swap(oaddr, caddr, raddr, type, target, disp, win);
}

// ---- Synchronisation ----------------------------------------------------------------------------------
int MPI_Win_fence(int assert_, MPI_Win win) {
  int rc = PMPI_Win_fence(assert_, win);
  Win* w = Find(win);
  if (rc != MPI_SUCCESS || !w) return rc;
  w->used_fence = true;
  w->gnc++;
  CloseEpoch(w, -1);
  if (w->protect && --w->fences_to_check == 0) {
    SyncPoint(w);
    w->fences_to_check = w->check_every;
  }
  return rc;
}

int MPI_Win_start(MPI_Group grp, int assert_, MPI_Win win) {
  if (Win* w = Find(win)) w->active++;
  return PMPI_Win_start(grp, assert_, win);
}

int MPI_Win_complete(MPI_Win win) {
  int rc = PMPI_Win_complete(win);
  if (Win* w = Find(win)) {
    w->active = std::max(0, w->active - 1);
    CloseEpoch(w, -1);
  }
  return rc;
}

int MPI_Win_post(MPI_Group grp, int assert_, MPI_Win win) {
  if (Win* w = Find(win)) w->active++;
  return PMPI_Win_post(grp, assert_, win);
}

int MPI_Win_wait(MPI_Win win) {
  int rc = PMPI_Win_wait(win);
  if (Win* w = Find(win)) w->active = std::max(0, w->active - 1);
  return rc;
}

int MPI_Win_test(MPI_Win win, int* flag) {
  int rc = PMPI_Win_test(win, flag);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS && *flag) w->active = std::max(0, w->active - 1);
  return rc;
}

int MPI_Win_lock(int type, int target, int assert_, MPI_Win win) {
  int rc = PMPI_Win_lock(type, target, assert_, win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) {
    w->lock_count++;
    if (target >= 0 && target < w->comm_size) w->sc[target] = 0;
  }
  return rc;
}

int MPI_Win_unlock(int target, MPI_Win win) {
  int rc = PMPI_Win_unlock(target, win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) {
    w->lock_count = std::max(0, w->lock_count - 1);
    CloseEpoch(w, target);
    if (target >= 0 && target < w->comm_size) w->sc[target] = 0;
  }
  return rc;
}

int MPI_Win_lock_all(int assert_, MPI_Win win) {
  int rc = PMPI_Win_lock_all(assert_, win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) {
    w->lock_count++;
    std::fill(w->sc.begin(), w->sc.end(), 0);
  }
  return rc;
}

int MPI_Win_unlock_all(MPI_Win win) {
  int rc = PMPI_Win_unlock_all(win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) {
    w->lock_count = std::max(0, w->lock_count - 1);
    CloseEpoch(w, -1);
    std::fill(w->sc.begin(), w->sc.end(), 0);
  }
  return rc;
}

int MPI_Win_flush(int target, MPI_Win win) {
  int rc = PMPI_Win_flush(target, win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) CloseEpoch(w, target);
  return rc;
}

int MPI_Win_flush_all(MPI_Win win) {
  int rc = PMPI_Win_flush_all(win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) CloseEpoch(w, -1);
  return rc;
}

int MPI_Win_flush_local(int target, MPI_Win win) {
  // Local completion only: the origin buffers of puts are free again, but gets are complete too (their
  // data has arrived), so their records can be written.
  int rc = PMPI_Win_flush_local(target, win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) FlushGets(w, target);
  return rc;
}

int MPI_Win_flush_local_all(MPI_Win win) {
  int rc = PMPI_Win_flush_local_all(win);
  if (Win* w = Find(win); w && rc == MPI_SUCCESS) FlushGets(w, -1);
  return rc;
}

// The Locks scheme's sync point: a barrier of the program's over all ranks. Passive-target windows are
// flushed (every access of ours complete at its target), then the barrier itself is the library's
// allreduce that decides on a checkpoint (an allreduce synchronises as a barrier does).
int MPI_Barrier(MPI_Comm comm) {
  if (!On()) return PMPI_Barrier(comm);
  int size = 0;
  PMPI_Comm_size(comm, &size);
  bool passive = false;
  for (Win* w : g->wins)
    if (w->protect && !w->used_fence && !w->active) passive = true;
  if (size != g->size || !passive) return PMPI_Barrier(comm);
  for (Win* w : g->wins) {
    if (!w->protect || w->used_fence || w->active) continue;
    if (w->lock_count > 0) {
      PMPI_Win_flush_all(w->win);
      CloseEpoch(w, -1);
    }
  }
  int rc = PMPI_Barrier(comm);  // keeps the program's own barrier: it may order more than our windows
  if (rc == MPI_SUCCESS) SyncPoint(nullptr);
  return rc;
}

}  // extern "C"
