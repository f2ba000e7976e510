#include "applevel/multilevel.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/checksum.h"
#include "storage/erasure.h"
#include "storage/placement.h"
#include "storage/stripes.h"

namespace revive::applevel {
namespace {
std::string DefaultHost() {
  char b[256] = {};
  if (gethostname(b, sizeof b - 1) != 0 || !b[0]) return "localhost";
  return b;
}
std::string LocalRoot(const Options& o) {
  if (!o.local_path.empty()) return o.local_path;
  return "/dev/shm/revive-" + std::to_string(getuid());
}
std::string HostOf(const Options& o) { return o.host.empty() ? DefaultHost() : o.host; }

// "<n>\n<bytes>" repeated: piece descriptions travel in one allgathered string per rank.
void Pack(std::string* out, const std::string& s) {
  *out += std::to_string(s.size()) + "\n";
  *out += s;
}
bool Unpack(const std::string& in, size_t* pos, std::string* s) {
  size_t nl = in.find('\n', *pos);
  if (nl == std::string::npos) return false;
  size_t n = std::strtoull(in.c_str() + *pos, nullptr, 10);
  if (nl + 1 + n > in.size()) return false;
  *s = in.substr(nl + 1, n);
  *pos = nl + 1 + n;
  return true;
}
}  // namespace

MultiLevel::MultiLevel(Env* env, const Options& opts, const std::string& name, const std::string& global_dir,
                       detail::Comm* comm, LevelPolicy policy)
    : env_(env),
      opts_(opts),
      name_(name),
      comm_(comm),
      policy_(std::move(policy)),
      local_(env, LocalRoot(opts), HostOf(opts), storage::LocalStore::MakeId(name, global_dir)) {}

MultiLevel::~MultiLevel() {
  flush_.stop = true;
  if (flush_.thread.joinable()) flush_.thread.join();
}

// Every rank's host and failure-domain path; hosts are numbered in order of their lowest rank.
void MultiLevel::Setup() {
  if (setup_) return;
  setup_ = true;
  std::string dom = opts_.failure_domain;
  while (!dom.empty() && dom.back() == '/') dom.pop_back();
  dom = dom.empty() ? local_.host() : dom + "/" + local_.host();
  std::vector<std::string> all = comm_->allgather_string(local_.host() + "\n" + dom);
  std::map<std::string, int> index;
  for (const std::string& a : all) {
    size_t nl = a.find('\n');
    hosts_.push_back(a.substr(0, nl));
    domains_.push_back(a.substr(nl + 1));
    auto it = index.find(hosts_.back());
    if (it == index.end()) {
      it = index.emplace(hosts_.back(), static_cast<int>(reader_.size())).first;
      reader_.push_back(static_cast<int>(hosts_.size()) - 1);
    }
    host_of_.push_back(it->second);
  }
}

storage::PieceMeta MultiLevel::BaseMeta(const VersionInfo& info) const {
  storage::PieceMeta m;
  m.name = info.name;
  m.version = info.version;
  m.iteration = info.iteration;
  m.parent_version = info.parent_version;
  m.ranks = static_cast<uint32_t>(comm_->size());
  m.rank = static_cast<uint32_t>(comm_->rank());
  m.host = local_.host();
  m.holder_host = local_.host();
  return m;
}

uint64_t MultiLevel::NewestLocal() {
  std::vector<uint64_t> v;
  Status s = local_.ListVersions(&v);
  if (!s.ok()) std::fprintf(stderr, "revive: %s: %s\n", local_.dir().c_str(), s.ToString().c_str());
  return comm_->allreduce_max_u64(v.empty() ? 0 : v.back());
}

Status MultiLevel::Write(const VersionInfo& info, const std::vector<storage::Span>& spans, uint64_t length,
                         uint64_t checksum, unsigned levels, Bytes* out) {
  Setup();
  const int me = comm_->rank();
  storage::PieceMeta m = BaseMeta(info);
  m.kind = storage::PieceMeta::kData;
  m.length = length;
  m.checksum = checksum;
  m.keys = info.keys;
  m.layouts = info.layouts;
  Status s = local_.WritePiece(m, spans);
  std::shared_ptr<const storage::LocalStore::Mapping> map;
  if (s.ok()) s = local_.MapPiece(m, &map);
  Bytes empty;
  std::string zeros;
  if (s.ok()) {
    *out = Bytes{map->data, map->size, map};
  } else {
    // Still take part in the exchanges below (with zeros of the announced length), or the others hang.
    zeros.assign(length, '\0');
    *out = Bytes{zeros.data(), zeros.size(), nullptr};
  }
  const Bytes& bytes = *out;
  // Every rank's length and checksum: partners and group members must know what they receive.
  std::vector<uint64_t> lens, sums;
  if (levels & (kL2 | kL3)) {
    char b[64];
    std::snprintf(b, sizeof b, "%llu %llu", static_cast<unsigned long long>(m.length),
                  static_cast<unsigned long long>(m.checksum));
    for (const std::string& x : comm_->allgather_string(b)) {
      unsigned long long l = 0, c = 0;
      std::sscanf(x.c_str(), "%llu %llu", &l, &c);
      lens.push_back(l);
      sums.push_back(c);
    }
    if (!placed_) {
      placed_ = true;
      const int g = std::max(opts_.group_size, opts_.parity + 1);
      Status p = storage::Partners(domains_, opts_.domain_depth, &partner_);
      // Fewer failure domains than the group size: smaller groups across all of them (never two members
      // in one domain), as long as they can still hold the parity.
      std::vector<std::string> distinct;
      for (const auto& d : domains_) distinct.push_back(storage::DomainAt(d, opts_.domain_depth));
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      const int eff = std::min<int>(g, static_cast<int>(distinct.size()));
      Status q = storage::FormGroups(domains_, opts_.domain_depth, eff, opts_.parity + 1, &groups_);
      if (!p.ok()) placement_error_ = "partner copies (L2): " + p.message();
      if (!q.ok()) placement_error_ += (placement_error_.empty() ? "" : "; ") + std::string("parity groups (L3): ") + q.message();
      if (!p.ok()) partner_.clear();
      if (!q.ok()) groups_.clear();
    }
    if (((levels & kL2) && partner_.empty()) || ((levels & kL3) && groups_.empty()))
      return Status::InvalidArgument("checkpoint '" + name_ + "': cannot place redundancy: " + placement_error_);
  }
  if (levels & kL2) {
    Status p = WritePartner(info, bytes, lens, sums);
    if (s.ok()) s = p;
  }
  if (levels & kL3) {
    Status p = WriteParity(info, bytes, lens, sums);
    if (s.ok()) s = p;
  }
  // A flush still reading (through its mapping) a version that this write makes old must end first: the
  // pruned version's files are recycled, i.e. overwritten in place by later versions. Before the
  // agreement, so that every rank's flush is past that point when the node's pruning rank deletes.
  {
    std::vector<uint64_t> kept = completed_;
    kept.push_back(info.version);
    if (kept.size() > static_cast<size_t>(opts_.keep)) kept.erase(kept.begin(), kept.end() - opts_.keep);
    if (flush_.active && flush_.info.version < kept.front() && flush_.thread.joinable()) flush_.thread.join();
  }
  // Agreement: the version is complete at the local levels only if every rank wrote every piece.
  std::string mine = s.ok() ? "" : s.ToString();
  std::vector<std::string> errs = comm_->allgather_string(mine);
  for (int r = 0; r < comm_->size(); ++r)
    if (!errs[static_cast<size_t>(r)].empty())
      return Status::IOError("rank " + std::to_string(r) + " (host " + hosts_[static_cast<size_t>(r)] +
                             "): " + errs[static_cast<size_t>(r)]);
  completed_.push_back(info.version);
  // Older versions go only now that a newer one is complete here; one rank per host deletes them.
  if (completed_.size() > static_cast<size_t>(opts_.keep)) {
    completed_.erase(completed_.begin(), completed_.end() - opts_.keep);
  }
  if (reader_[static_cast<size_t>(host_of_[static_cast<size_t>(me)])] == me) {
    Status ps = local_.RemoveOlderThan(completed_.front());
    if (!ps.ok()) std::fprintf(stderr, "revive: %s: removing old versions: %s\n", local_.dir().c_str(), ps.ToString().c_str());
  }
  return Status::OK();
}

// L2: every rank sends its bytes to its partner (on another failure domain), which keeps them as
// rank-<R> in its own node's storage.
Status MultiLevel::WritePartner(const VersionInfo& info, const Bytes& bytes, const std::vector<uint64_t>& lens,
                                const std::vector<uint64_t>& sums) {
  const int me = comm_->rank();
  std::vector<int> from;
  for (int q = 0; q < comm_->size(); ++q)
    if (partner_[static_cast<size_t>(q)] == me) from.push_back(q);
  std::vector<std::string>& got = l2_in_;
  got.resize(from.size());
  std::vector<detail::Comm::RecvBuf> recvs;
  for (size_t i = 0; i < from.size(); ++i) {
    got[i].resize(lens[static_cast<size_t>(from[i])]);
    recvs.push_back({from[i], got[i].data(), got[i].size()});
  }
  comm_->exchange({{partner_[static_cast<size_t>(me)], bytes.data, bytes.size}}, recvs);
  Status s;
  for (size_t i = 0; i < from.size() && s.ok(); ++i) {
    const size_t q = static_cast<size_t>(from[i]);
    if (Checksum64(got[i].data(), got[i].size()) != sums[q]) {
      s = Status::Corruption("partner copy of rank " + std::to_string(q) + " arrived damaged");
      break;
    }
    storage::PieceMeta m = BaseMeta(info);
    m.kind = storage::PieceMeta::kData;
    m.rank = static_cast<uint32_t>(q);
    m.host = hosts_[q];
    m.length = lens[q];
    m.checksum = sums[q];
    m.keys = info.keys;
    m.layouts = info.layouts;
    s = local_.WritePiece(m, got[i].data(), got[i].size());
  }
  return s;
}

// L3: the rotated stripes of this rank's group (stripes.h). Each member sends each of its data blocks to
// the m holders of that block's stripe; each holder encodes the stripes it holds parity for and keeps its
// parity slots as parity-<R>. Messages between two members match in ascending stripe order on both sides.
Status MultiLevel::WriteParity(const VersionInfo& info, const Bytes& bytes, const std::vector<uint64_t>& lens,
                               const std::vector<uint64_t>& sums) {
  const int me = comm_->rank();
  const std::vector<int>* group = nullptr;
  for (const auto& g : groups_)
    if (std::find(g.begin(), g.end(), me) != g.end()) group = &g;
  if (!group) return Status::InvalidArgument("rank " + std::to_string(me) + " is in no parity group");
  const int g = static_cast<int>(group->size()), m = opts_.parity;
  const int idx = static_cast<int>(std::find(group->begin(), group->end(), me) - group->begin());
  uint64_t maxlen = 0;
  for (int r : *group) maxlen = std::max(maxlen, lens[static_cast<size_t>(r)]);
  storage::StripeLayout layout(g, m, maxlen);
  std::unique_ptr<storage::ErasureCode> code;
  Status s = storage::ErasureCode::Make(layout.k(), m, &code);
  if (!s.ok()) return s;
  const size_t B = layout.block_size();
  // This rank's blocks: straight from its bytes, except the ones that run past its end (zero padded).
  std::vector<std::string> padded;
  auto block = [&](int j) -> const char* {
    const size_t off = static_cast<size_t>(j) * B;
    if (off + B <= bytes.size) return bytes.data + off;
    padded.emplace_back(B, '\0');
    if (off < bytes.size) std::memcpy(padded.back().data(), bytes.data + off, bytes.size - off);
    return padded.back().data();
  };
  padded.reserve(static_cast<size_t>(layout.k()));
  std::vector<detail::Comm::SendBuf> sends;
  for (int st = 0; st < g; ++st)
    for (const auto& [member, j] : layout.data_blocks(st)) {
      if (member != idx) continue;
      const char* p = block(j);
      for (int t = 0; t < m; ++t) sends.push_back({(*group)[static_cast<size_t>(layout.parity_holder(st, t))], p, B});
    }
  const auto slots = layout.parity_slots(idx);
  std::vector<std::string>& in = l3_in_;
  in.resize(slots.size() * static_cast<size_t>(layout.k()));
  for (std::string& b : in) b.resize(B);
  std::vector<detail::Comm::RecvBuf> recvs;
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto db = layout.data_blocks(slots[i].first);
    for (size_t p = 0; p < db.size(); ++p) {
      std::string& buf = in[i * static_cast<size_t>(layout.k()) + p];
      recvs.push_back({(*group)[static_cast<size_t>(db[p].first)], buf.data(), B});
    }
  }
  comm_->exchange(sends, recvs);
  // Encode: every parity of the stripe is computed and the one this rank holds kept (for m = 2 the
  // other one is computed twice in the group; simpler than a second exchange, and encoding runs at
  // several GB/s, far above the exchange).
  std::string& parity = l3_parity_;
  parity.resize(slots.size() * B);
  std::vector<std::string>& outs = l3_out_;
  outs.resize(static_cast<size_t>(m));
  for (std::string& o : outs) o.resize(B);
  for (size_t i = 0; i < slots.size(); ++i) {
    std::vector<const uint8_t*> dp;
    for (int p = 0; p < layout.k(); ++p)
      dp.push_back(reinterpret_cast<const uint8_t*>(in[i * static_cast<size_t>(layout.k()) + static_cast<size_t>(p)].data()));
    std::vector<uint8_t*> pp;
    for (auto& o : outs) pp.push_back(reinterpret_cast<uint8_t*>(o.data()));
    code->Encode(B, dp.data(), pp.data());
    std::memcpy(parity.data() + i * B, outs[static_cast<size_t>(slots[i].second)].data(), B);
  }
  storage::PieceMeta pm = BaseMeta(info);
  pm.kind = storage::PieceMeta::kParity;
  pm.parity = m;
  for (int r : *group) {
    pm.members.push_back(static_cast<uint32_t>(r));
    pm.lengths.push_back(lens[static_cast<size_t>(r)]);
    pm.checksums.push_back(sums[static_cast<size_t>(r)]);
  }
  pm.block = B;
  pm.parity_length = parity.size();
  pm.parity_checksum = Checksum64(parity.data(), parity.size());
  return local_.WritePiece(pm, parity.data(), parity.size());
}

void MultiLevel::StartFlush(const VersionInfo& info, Bytes bytes,
                            std::vector<std::pair<size_t, size_t>> records, std::vector<std::string> paths,
                            std::string dir, std::function<Status()> publish) {
  flush_.active = true;
  flush_.info = info;
  flush_.bytes = bytes;
  flush_.done = false;
  flush_.stop = false;
  flush_.result = Status::OK();
  const int me = comm_->rank(), n = comm_->size();
  flush_.thread = std::thread([this, bytes, records = std::move(records), paths = std::move(paths),
                               dir = std::move(dir), publish = std::move(publish), me, n] {
    Status s;
    for (size_t i = 0; i < records.size() && s.ok(); ++i) {
      std::unique_ptr<WritableFile> f;
      s = env_->NewWritableFile(paths[i], &f);
      if (s.ok()) s = f->Append(bytes.data + records[i].first, records[i].second);
      if (s.ok()) s = f->Sync();
      if (s.ok()) s = f->Close();
    }
    if (s.ok()) s = env_->SyncDir(dir);
    // The marker says this rank's files are durable (or that they failed, so rank 0 stops waiting).
    const std::string marker = dir + "/" + (s.ok() ? ".flushed." : ".failed.") + std::to_string(me);
    Status m = WriteFileAtomic(env_, marker, s.ok() ? "" : s.ToString());
    if (s.ok()) s = m;
    if (me == 0 && s.ok()) {
      // Wait for every rank's marker; give up a minute after the destructor asked (a rank that died).
      using Clock = std::chrono::steady_clock;
      Clock::time_point stop_at{};
      for (int r = 1; r < n && s.ok();) {
        if (env_->FileExists(dir + "/.flushed." + std::to_string(r))) {
          ++r;
          continue;
        }
        if (env_->FileExists(dir + "/.failed." + std::to_string(r))) {
          std::string why;
          ReadFileToString(env_, dir + "/.failed." + std::to_string(r), &why);
          s = Status::IOError("rank " + std::to_string(r) + ": " + why);
          break;
        }
        if (flush_.stop) {
          if (stop_at == Clock::time_point{}) stop_at = Clock::now() + std::chrono::seconds(60);
          if (Clock::now() > stop_at) {
            s = Status::IOError("rank " + std::to_string(r) + " never finished its files");
            break;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (s.ok()) s = publish();
    }
    flush_.result = s;
    flush_.done = true;
  });
}

bool MultiLevel::FinishFlush(bool wait, Status* s, VersionInfo* info) {
  if (!flush_.active) return false;
  if (!wait && !flush_.done) return false;
  if (flush_.thread.joinable()) flush_.thread.join();
  *s = flush_.result;
  *info = flush_.info;
  flush_.active = false;
  flush_.bytes = Bytes();
  return true;
}

// Only the lowest rank of each host reads its node's directory; every rank then holds the same catalog.
void MultiLevel::Scan() {
  Setup();
  if (scanned_) return;
  scanned_ = true;
  const int me = comm_->rank();
  std::string mine;
  if (reader_[static_cast<size_t>(host_of_[static_cast<size_t>(me)])] == me) {
    std::vector<storage::PieceMeta> metas;
    std::vector<std::string> problems;
    Status s = local_.Scan(&metas, &problems);
    if (!s.ok()) problems.push_back(s.ToString());
    for (const auto& p : problems) std::fprintf(stderr, "revive: ignoring %s\n", p.c_str());
    for (const auto& m : metas) Pack(&mine, storage::EncodePieceMeta(m));
  }
  std::vector<std::string> all = comm_->allgather_string(mine);
  for (size_t r = 0; r < all.size(); ++r) {
    size_t pos = 0;
    std::string text;
    while (Unpack(all[r], &pos, &text)) {
      storage::PieceMeta m;
      if (storage::DecodePieceMeta("piece from rank " + std::to_string(r), text, &m).ok())
        catalog_.Add(host_of_[r], m);
    }
  }
}

bool MultiLevel::Restore(uint64_t v, uint64_t want_parent, Bytes* bytes, storage::VersionPlan* plan,
                         std::string* why) {
  Scan();
  const int me = comm_->rank(), n = comm_->size();
  const int my_host = host_of_[static_cast<size_t>(me)];
  for (int round = 0;; ++round) {
    if (!catalog_.Plan(v, static_cast<uint32_t>(n), host_of_, plan, why)) return false;
    if (want_parent != ~uint64_t{0} && plan->parent_version != want_parent) {
      *why = "version " + std::to_string(v) + " belongs to parent version " + std::to_string(plan->parent_version);
      return false;
    }
    // What each rank needs, in one deterministic order: every rank lists the same messages.
    struct Need {
      int to;
      storage::PieceRef ref;
      std::string* into;  // receiver side only
    };
    const storage::RankSource& mine = plan->sources[static_cast<size_t>(me)];
    const size_t g = mine.group ? mine.group->members.size() : 0;
    std::vector<std::string> mdata(g), mparity(g);
    std::string own;
    std::shared_ptr<const storage::LocalStore::Mapping> own_map;
    std::vector<Need> needs;
    for (int r = 0; r < n; ++r) {
      const storage::RankSource& src = plan->sources[static_cast<size_t>(r)];
      if (src.how == storage::RankSource::kRead) {
        needs.push_back({r, src.data, r == me ? &own : nullptr});
        continue;
      }
      for (size_t i = 0; i < src.member_data.size(); ++i) {
        if (!src.member_data[i].ok()) continue;
        needs.push_back({r, src.member_data[i], r == me ? &mdata[i] : nullptr});
        needs.push_back({r, src.member_parity[i], r == me ? &mparity[i] : nullptr});
      }
    }
    std::vector<std::string> bad;  // "holder kind rank" of pieces that failed their checks
    auto mark = [&](const storage::PieceRef& ref) {
      bad.push_back(std::to_string(ref.holder) + " " + std::to_string(static_cast<int>(ref.meta->kind)) + " " +
                    std::to_string(ref.meta->rank));
    };
    std::vector<std::string> outgoing;
    outgoing.reserve(needs.size());
    std::vector<detail::Comm::SendBuf> sends;
    std::vector<detail::Comm::RecvBuf> recvs;
    std::vector<std::pair<std::string*, storage::PieceRef>> check;
    for (Need& nd : needs) {
      const int holder_rank = reader_[static_cast<size_t>(nd.ref.holder)];
      const bool local = nd.ref.holder == host_of_[static_cast<size_t>(nd.to)];
      if (nd.to == me && local) {
        // On this node: read it here (a rank on the same host reads the same directory). This rank's own
        // bytes are mapped, not copied: they are parsed and copied into the program's memory once.
        Status s;
        if (nd.into == &own) {
          s = local_.MapPiece(*nd.ref.meta, &own_map);
          if (s.ok() && Checksum64(own_map->data, own_map->size) != nd.ref.meta->checksum)
            s = Status::Corruption(local_.PiecePath(v, *nd.ref.meta) + ": checksum mismatch (the piece is damaged)");
        } else {
          s = local_.ReadPiece(*nd.ref.meta, nd.into);
        }
        if (!s.ok()) {
          std::fprintf(stderr, "revive: %s\n", s.ToString().c_str());
          mark(nd.ref);
        }
        continue;
      }
      if (local) continue;
      if (holder_rank == me) {
        outgoing.emplace_back();
        Status s = local_.ReadPiece(*nd.ref.meta, &outgoing.back());
        if (!s.ok()) {
          std::fprintf(stderr, "revive: %s\n", s.ToString().c_str());
          mark(nd.ref);
          outgoing.back().assign(nd.ref.meta->FileLength(), '\0');  // the receiver still expects the bytes
        }
        sends.push_back({nd.to, outgoing.back().data(), outgoing.back().size()});
      }
      if (nd.to == me) {
        nd.into->resize(nd.ref.meta->FileLength());
        recvs.push_back({holder_rank, nd.into->data(), nd.into->size()});
        check.push_back({nd.into, nd.ref});
      }
    }
    comm_->exchange(sends, recvs);
    for (auto& [buf, ref] : check)
      if (Checksum64(buf->data(), buf->size()) != ref.meta->FileChecksum()) mark(ref);
    std::string packed;
    for (const auto& b : bad) packed += b + "\n";
    bool any_bad = false;
    for (const std::string& all : comm_->allgather_string(packed)) {
      size_t pos = 0;
      while (pos < all.size()) {
        size_t nl = all.find('\n', pos);
        int h = 0, k = 0;
        unsigned r = 0;
        if (std::sscanf(all.c_str() + pos, "%d %d %u", &h, &k, &r) == 3)
          catalog_.MarkBad(h, static_cast<storage::PieceMeta::Kind>(k), r, v);
        any_bad = true;
        pos = nl + 1;
      }
    }
    if (any_bad) {
      if (me == 0)
        std::fprintf(stderr, "revive: checkpoint '%s' version %llu: damaged pieces set aside, planning again\n",
                     name_.c_str(), static_cast<unsigned long long>(v));
      if (round > 2 * n + 4) {  // every round removes a piece; this bound is never reached in practice
        *why = "version " + std::to_string(v) + ": too many damaged pieces";
        return false;
      }
      continue;
    }
    // Rebuild this rank's bytes from its group, where it has no copy.
    Status s;
    if (mine.how == storage::RankSource::kRead) {
      if (own_map) {
        *bytes = Bytes{own_map->data, own_map->size, own_map};
      } else {
        auto buf = std::make_shared<std::string>(std::move(own));
        *bytes = Bytes{buf->data(), buf->size(), buf};
      }
    } else {
      const storage::PieceMeta& grp = *mine.group;
      std::vector<bool> present(g);
      for (size_t i = 0; i < g; ++i) present[i] = mine.member_data[i].ok();
      uint64_t maxlen = 0;
      for (uint64_t l : grp.lengths) maxlen = std::max(maxlen, l);
      storage::StripeLayout layout(static_cast<int>(g), grp.parity, maxlen);
      std::unique_ptr<storage::ErasureCode> code;
      s = storage::ErasureCode::Make(layout.k(), grp.parity, &code);
      if (s.ok() && layout.block_size() != grp.block)
        s = Status::Corruption("group block size " + std::to_string(grp.block) + " does not match its layout");
      if (s.ok()) s = storage::RebuildGroup(*code, layout, &mdata, grp.lengths, &mparity, present);
      const size_t i = static_cast<size_t>(mine.index);
      if (s.ok() && (mdata[i].size() != grp.lengths[i] || Checksum64(mdata[i].data(), mdata[i].size()) != grp.checksums[i]))
        s = Status::Corruption("rank " + std::to_string(me) + "'s bytes rebuilt from its group do not match their checksum");
      if (s.ok()) {
        auto buf = std::make_shared<std::string>(std::move(mdata[i]));
        *bytes = Bytes{buf->data(), buf->size(), buf};
      }
    }
    std::vector<std::string> errs = comm_->allgather_string(s.ok() ? "" : s.ToString());
    for (const auto& e : errs)
      if (!e.empty()) {
        *why = "version " + std::to_string(v) + ": " + e;
        return false;
      }
    // Bytes that came from another node or were rebuilt are kept on this node too, so the next restart
    // (before the next checkpoint restores full redundancy) finds them here.
    if (mine.how != storage::RankSource::kRead || mine.data.holder != my_host) {
      storage::PieceMeta pm;
      pm.kind = storage::PieceMeta::kData;
      pm.name = name_;
      pm.version = v;
      pm.iteration = plan->iteration;
      pm.parent_version = plan->parent_version;
      pm.ranks = static_cast<uint32_t>(n);
      pm.rank = static_cast<uint32_t>(me);
      pm.host = pm.holder_host = local_.host();
      pm.length = bytes->size;
      pm.checksum = Checksum64(bytes->data, bytes->size);
      pm.keys = plan->keys;
      pm.layouts = plan->layouts;
      Status w = local_.WritePiece(pm, bytes->data, bytes->size);
      if (!w.ok()) std::fprintf(stderr, "revive: keeping the restored bytes on this node: %s\n", w.ToString().c_str());
    }
    return true;
  }
}

}  // namespace revive::applevel
