#include "cli/levels_offline.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/checksum.h"
#include "storage/data_file.h"
#include "storage/erasure.h"
#include "storage/stripes.h"

namespace revive::cli {
namespace fs = std::filesystem;
using storage::PieceMeta;
using storage::PieceRef;

std::string DefaultLocalRoot() {
  const char* e = std::getenv("REVIVE_LOCAL_PATH");
  if (e && *e) return e;
  return "/dev/shm/revive-" + std::to_string(getuid());
}

std::string NormalizeDir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  std::string s = ec ? dir : p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string Mib(uint64_t b) {
  char buf[48];
  if (b < 1024 * 1024) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return buf;
}

Status Offline::Load(Env* e, const std::string& dir, const std::string& root_opt) {
  env = e;
  global_dir = NormalizeDir(dir);
  size_t slash = global_dir.rfind('/');
  name = slash == std::string::npos ? global_dir : global_dir.substr(slash + 1);
  if (name.empty()) return Status::InvalidArgument(dir + ": not a checkpoint directory <base>/<name>");
  id = storage::LocalStore::MakeId(name, global_dir);
  root = root_opt.empty() ? DefaultLocalRoot() : root_opt;
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
      if (fs::is_directory(it->path() / id)) hosts.push_back(it->path().filename().string());
    if (ec) problems.push_back(root + ": " + ec.message());
  }
  std::sort(hosts.begin(), hosts.end());
  for (size_t h = 0; h < hosts.size(); ++h) {
    stores.push_back(std::make_unique<storage::LocalStore>(env, root, hosts[h], id));
    std::vector<PieceMeta> metas;
    Status s = stores.back()->Scan(&metas, &problems);
    if (!s.ok()) problems.push_back(stores.back()->dir() + ": " + s.ToString());
    for (auto& m : metas) {
      catalog.Add(static_cast<int>(h), m);
      pieces.emplace_back(static_cast<int>(h), std::move(m));
    }
  }
  return Status::OK();
}

std::vector<uint64_t> Offline::AllVersions() const {
  std::vector<uint64_t> v = catalog.Versions();
  std::vector<uint64_t> g;
  storage::VersionStore store(env, global_dir);
  if (env->FileExists(global_dir) && store.ListVersionDirs(&g).ok()) v.insert(v.end(), g.begin(), g.end());
  std::sort(v.rbegin(), v.rend());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

int Offline::HostIndex(const std::string& host) const {
  auto it = std::lower_bound(hosts.begin(), hosts.end(), host);
  return it != hosts.end() && *it == host ? static_cast<int>(it - hosts.begin()) : -1;
}

storage::LocalStore Offline::StoreFor(const std::string& host) const { return storage::LocalStore(env, root, host, id); }

std::string Offline::PiecePath(const std::string& host, const PieceMeta& m) const {
  return StoreFor(host).PiecePath(m.version, m);
}

uint32_t Offline::RanksOf(uint64_t v) const {
  for (const auto& [h, m] : pieces)
    if (m.version == v && m.kind == PieceMeta::kData) return m.ranks;
  for (const auto& [h, m] : pieces)
    if (m.version == v) return m.ranks;
  return 0;
}

std::string Offline::HomeOf(uint64_t v, uint32_t r) const {
  // The owner's host is in its data pieces (partner copies too) and in the parity piece it holds.
  for (const auto& [h, m] : pieces)
    if (m.version == v && m.rank == r) return m.host;
  return "";
}

std::vector<int> Offline::Homes(uint64_t v, uint32_t ranks) const {
  std::vector<int> home(ranks, -1);
  for (uint32_t r = 0; r < ranks; ++r) home[r] = HostIndex(HomeOf(v, r));
  return home;
}

LocalLevels AssessLocal(const Offline& o, uint64_t v) {
  LocalLevels L;
  L.ranks = o.RanksOf(v);
  std::set<std::string> hosts;
  std::vector<bool> l1(L.ranks), l2(L.ranks);
  std::vector<uint64_t> len(L.ranks);
  // Parity pieces per holder rank and the groups they describe.
  std::map<uint32_t, const PieceMeta*> parity;
  for (const auto& [h, m] : o.pieces) {
    if (m.version != v || m.ranks != L.ranks || m.rank >= L.ranks) continue;
    hosts.insert(o.hosts[static_cast<size_t>(h)]);
    L.iteration = m.iteration;
    if (m.kind == PieceMeta::kData) {
      len[m.rank] = m.length;
      if (m.holder_host == m.host && o.hosts[static_cast<size_t>(h)] == m.host) l1[m.rank] = true;
      if (m.holder_host != m.host) {
        l2[m.rank] = true;
        L.l2_used = true;
      }
    } else {
      parity[m.rank] = &m;
      L.l3_used = true;
    }
  }
  for (uint32_t r = 0; r < L.ranks; ++r) {
    L.bytes += len[r];
    if (l1[r]) L.l1.push_back(r);
    if (l2[r]) L.l2.push_back(r);
    // L3: rank r is in a group every member of which holds its parity piece (the level is whole, so any
    // `parity` members' data can be rebuilt).
    const PieceMeta* grp = nullptr;
    for (const auto& [q, p] : parity)
      if (p->MemberIndex(r) >= 0) grp = p;
    if (!grp) continue;
    bool whole = true;
    for (uint32_t q : grp->members) {
      auto it = parity.find(q);
      if (it == parity.end() || it->second->members != grp->members || it->second->checksums != grp->checksums) whole = false;
    }
    if (whole) L.l3.push_back(r);
  }
  L.hosts.assign(hosts.begin(), hosts.end());
  storage::VersionPlan plan;
  if (L.ranks > 0) {
    L.restorable = o.catalog.Plan(v, L.ranks, o.Homes(v, L.ranks), &plan, &L.why);
    if (L.restorable) L.summary = plan.Summary();
  } else {
    L.why = "no local pieces";
  }
  return L;
}

GlobalLevel AssessGlobal(const Offline& o, uint64_t v) {
  GlobalLevel G;
  storage::VersionStore store(o.env, o.global_dir);
  const std::string vdir = store.VersionDir(v);
  G.dir = o.env->FileExists(vdir);
  if (!G.dir) return G;
  std::vector<std::string> names;
  if (o.env->GetChildren(vdir, &names).ok())
    for (const auto& n : names) {
      uint64_t sz = 0;
      if (n != "." && n != ".." && o.env->GetFileSize(vdir + "/" + n, &sz).ok()) G.bytes += sz;
    }
  if (!o.env->FileExists(vdir + "/" + storage::kManifestName)) {
    G.manifest_error = vdir + "/" + storage::kManifestName + ": missing (version incomplete at L4)";
    return G;
  }
  Status s = store.ReadManifest(v, &G.m);
  if (!s.ok()) G.manifest_error = s.ToString();
  else G.manifest = true;
  return G;
}

GlobalLevel VerifyGlobal(const Offline& o, uint64_t v) {
  GlobalLevel G = AssessGlobal(o, v);
  if (!G.manifest) {
    if (G.dir) G.damaged.push_back(G.manifest_error);
    return G;
  }
  storage::VersionStore store(o.env, o.global_dir);
  if (!G.m.shared_file.empty()) {
    const std::string path = store.VersionDir(v) + "/" + G.m.shared_file;
    std::string all;
    Status s = ReadFileToString(o.env, path, &all);
    if (!s.ok()) {
      G.damaged.push_back(path + ": " + s.ToString());
      return G;
    }
    for (size_t r = 0; r < G.m.ranges.size(); ++r) {
      const auto& rg = G.m.ranges[r];
      if (rg.offset + rg.length > all.size() || Checksum64(all.data() + rg.offset, rg.length) != rg.checksum)
        G.damaged.push_back(path + ": rank " + std::to_string(r) + "'s range fails its checksum");
    }
    return G;
  }
  for (uint32_t r = 0; r < G.m.ranks; ++r)
    for (const auto& key : G.m.keys) {
      const std::string path = store.DataPath(v, key, static_cast<int>(r), static_cast<int>(G.m.ranks));
      if (!o.env->FileExists(path)) {
        G.damaged.push_back(path + ": missing");
        continue;
      }
      std::unique_ptr<storage::DataFileReader> rd;
      Status s = storage::DataFileReader::Open(o.env, path, &rd);
      if (s.ok()) s = rd->Verify();
      if (!s.ok()) G.damaged.push_back(path + ": " + s.ToString());
    }
  return G;
}

std::string DefaultCkptDir();  // cli/common.h (not included: its Progress() clashes with the class above)

void AddDirOptions(CLI::App* c, std::string* dir, std::string* local) {
  c->add_option("dir", *dir, "Checkpoint directory <base>/<name> (default: REVIVE_CKPT_DIR or ./revive-ckpt)")
      ->default_val(DefaultCkptDir());
  c->add_option("--local", *local, "Local root (default REVIVE_LOCAL_PATH or /dev/shm/revive-<uid>)");
}

int LoadForTool(const char* tool, const std::string& dir, const std::string& local, Offline* o, bool need_local,
                uint64_t requested, uint64_t* v) {
  Status s = o->Load(Env::Default(), dir, local);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, s.ToString().c_str());
    return 2;
  }
  if (!need_local) return 0;
  for (const auto& p : o->problems) std::fprintf(stderr, "%s: ignoring %s\n", tool, p.c_str());
  std::vector<uint64_t> versions = o->catalog.Versions();
  if (versions.empty()) {
    std::fprintf(stderr, "%s: %s: no local pieces under %s\n", tool, o->global_dir.c_str(), o->root.c_str());
    return 1;
  }
  *v = requested ? requested : versions.front();
  return 0;
}

Progress::Progress() : tty_(isatty(2) != 0) {}
Progress::~Progress() { Done(); }
void Progress::Show(const std::string& line) {
  if (!tty_) return;
  std::fprintf(stderr, "\r%s\033[K", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}
void Progress::Done() {
  if (tty_ && shown_) std::fprintf(stderr, "\r\033[K");
  shown_ = false;
}

bool RestoreLocal(Offline& o, uint64_t v, std::vector<std::string>* bytes, storage::VersionPlan* plan,
                  std::vector<std::string>* damaged, std::string* why, Progress* progress) {
  const uint32_t ranks = o.RanksOf(v);
  if (ranks == 0) {
    *why = "version " + std::to_string(v) + ": no local pieces";
    return false;
  }
  uint64_t total = 0;
  for (int round = 0;; ++round) {
    if (!o.catalog.Plan(v, ranks, o.Homes(v, ranks), plan, why)) return false;
    if (round > static_cast<int>(o.pieces.size()) + 2) {
      *why = "version " + std::to_string(v) + ": too many damaged pieces";
      return false;
    }
    total = 0;
    for (const auto& src : plan->sources)
      if (src.how == storage::RankSource::kRead) total += src.data.meta->length;
      else total += src.group->lengths[static_cast<size_t>(src.index)];
    uint64_t done = 0;
    bool any_bad = false;
    // Reads a piece once; a failure marks it bad (the plan is redone).
    std::map<std::pair<int, const PieceMeta*>, std::string> cache;
    auto read = [&](const PieceRef& ref, std::string** out) -> bool {
      auto key = std::make_pair(ref.holder, ref.meta);
      auto it = cache.find(key);
      if (it == cache.end()) {
        std::string b;
        Status s = o.stores[static_cast<size_t>(ref.holder)]->ReadPiece(*ref.meta, &b);
        if (!s.ok()) {
          damaged->push_back(s.ToString());
          o.catalog.MarkBad(ref.holder, ref.meta->kind, ref.meta->rank, v);
          any_bad = true;
          return false;
        }
        it = cache.emplace(key, std::move(b)).first;
      }
      *out = &it->second;
      return true;
    };
    bytes->assign(ranks, std::string());
    for (uint32_t r = 0; r < ranks && !any_bad; ++r) {
      const storage::RankSource& src = plan->sources[r];
      const uint64_t mine = src.how == storage::RankSource::kRead ? src.data.meta->length
                                                                   : src.group->lengths[static_cast<size_t>(src.index)];
      if (progress)
        progress->Show((src.how == storage::RankSource::kRead ? "reading rank " : "rebuilding rank ") + std::to_string(r) +
                       " (" + Mib(done) + "/" + Mib(total) + ")");
      if (src.how == storage::RankSource::kRead) {
        std::string* b = nullptr;
        if (read(src.data, &b)) (*bytes)[r] = *b;
        done += mine;
        continue;
      }
      const PieceMeta& grp = *src.group;
      const size_t g = grp.members.size();
      std::vector<std::string> mdata(g), mparity(g);
      std::vector<bool> present(g);
      for (size_t i = 0; i < g && !any_bad; ++i) {
        present[i] = src.member_data[i].ok();
        if (!present[i]) continue;
        std::string *d = nullptr, *p = nullptr;
        if (read(src.member_data[i], &d) && read(src.member_parity[i], &p)) {
          mdata[i] = *d;
          mparity[i] = *p;
        }
      }
      if (any_bad) break;
      uint64_t maxlen = 0;
      for (uint64_t l : grp.lengths) maxlen = std::max(maxlen, l);
      storage::StripeLayout layout(static_cast<int>(g), grp.parity, maxlen);
      std::unique_ptr<storage::ErasureCode> code;
      Status s = storage::ErasureCode::Make(layout.k(), grp.parity, &code);
      if (s.ok() && layout.block_size() != grp.block)
        s = Status::Corruption("group block size " + std::to_string(grp.block) + " does not match its layout");
      if (s.ok()) s = storage::RebuildGroup(*code, layout, &mdata, grp.lengths, &mparity, present);
      const size_t i = static_cast<size_t>(src.index);
      if (s.ok() && Checksum64(mdata[i].data(), mdata[i].size()) != grp.checksums[i])
        s = Status::Corruption("rank " + std::to_string(r) + "'s bytes rebuilt from its group do not match their checksum");
      if (!s.ok()) {
        *why = "version " + std::to_string(v) + ": " + s.ToString();
        return false;
      }
      (*bytes)[r] = std::move(mdata[i]);
      done += mine;
    }
    if (progress) progress->Done();
    if (!any_bad) return true;
  }
}

}  // namespace revive::cli
