#include "storage/local_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <limits>
#include <cstdio>
#include <cstdlib>

#include "core/checksum.h"
#include "storage/text_fields.h"

namespace revive::storage {
namespace {
constexpr char kFirstLine[] = "revive-piece 1\n";
constexpr char kFirstLine2[] = "revive-piece 2\n";  // a data piece with dist=/replicated= lines (manifest.h)
constexpr char kMetaSuffix[] = ".meta";

bool ParseHex(const std::string& s, uint64_t* v) {
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *v = std::strtoull(s.c_str(), nullptr, 16);
  return true;
}
// Space-separated numbers (decimal, or 16-digit hex).
template <class T>
bool ParseList(const std::string& s, bool hex, std::vector<T>* out) {
  out->clear();
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t sp = s.find(' ', pos);
    if (sp == std::string::npos) sp = s.size();
    uint64_t u = 0;
    if (!(hex ? ParseHex(s.substr(pos, sp - pos), &u) : ParseU64(s.substr(pos, sp - pos), &u))) return false;
    if (u > std::numeric_limits<T>::max()) return false;
    out->push_back(static_cast<T>(u));
    pos = sp + 1;
  }
  return true;
}
template <class T>
std::string JoinList(const std::vector<T>& v, bool hex) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ' ';
    s += hex ? Hex(v[i]) : std::to_string(v[i]);
  }
  return s;
}
// Host names and checkpoint names become path components.
bool SafeComponent(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\n') == std::string::npos;
}
}  // namespace

int PieceMeta::MemberIndex(uint32_t r) const {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == r) return static_cast<int>(i);
  return -1;
}

std::string PieceMeta::FileName() const {
  return (kind == kData ? "rank-" : "parity-") + std::to_string(rank);
}

std::string EncodePieceMeta(const PieceMeta& m) {
  std::string s = m.layouts.empty() ? kFirstLine : kFirstLine2;
  s += std::string("kind=") + (m.kind == PieceMeta::kData ? "data" : "parity") + "\n";
  s += "name=" + m.name + "\n";
  s += "version=" + std::to_string(m.version) + "\n";
  s += "iteration=" + std::to_string(m.iteration) + "\n";
  s += "parent_version=" + std::to_string(m.parent_version) + "\n";
  s += "ranks=" + std::to_string(m.ranks) + "\n";
  s += "rank=" + std::to_string(m.rank) + "\n";
  s += "host=" + m.host + "\n";
  s += "holder_host=" + m.holder_host + "\n";
  if (m.kind == PieceMeta::kData) {
    s += "length=" + std::to_string(m.length) + "\n";
    s += "data_checksum=" + Hex(m.checksum) + "\n";
    for (const auto& k : m.keys) s += "key=" + k + "\n";
    m.layouts.Encode(&s);
  } else {
    s += "parity=" + std::to_string(m.parity) + "\n";
    s += "members=" + JoinList(m.members, false) + "\n";
    s += "block=" + std::to_string(m.block) + "\n";
    s += "lengths=" + JoinList(m.lengths, false) + "\n";
    s += "checksums=" + JoinList(m.checksums, true) + "\n";
    s += "parity_length=" + std::to_string(m.parity_length) + "\n";
    s += "parity_checksum=" + Hex(m.parity_checksum) + "\n";
  }
  Seal(&s);
  return s;
}

Status DecodePieceMeta(const std::string& what, const std::string& t, PieceMeta* m) {
  const bool v2 = t.compare(0, sizeof kFirstLine2 - 1, kFirstLine2) == 0;
  if (!v2 && t.compare(0, sizeof kFirstLine - 1, kFirstLine) != 0) {
    if (t.compare(0, 13, "revive-piece ") == 0)
      return Status::Corruption(what + ": piece format is not supported (this build reads versions 1 and 2)");
    return Status::Corruption(what + ": not a revive piece description");
  }
  size_t cpos = 0;
  Status sealed = CheckSeal(what, "", t, &cpos);
  if (!sealed.ok()) return sealed;
  *m = PieceMeta();
  enum { kKind, kName, kVersion, kIteration, kParent, kRanks, kRank, kHost, kHolder, kLength, kDataSum,
         kParity, kMembers, kBlock, kLengths, kSums, kPLen, kPSum, kFields };
  bool seen[kFields] = {};
  size_t pos = sizeof kFirstLine - 1;
  while (pos < cpos) {
    size_t nl = t.find('\n', pos);
    std::string line = t.substr(pos, nl - pos);
    pos = nl + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::Corruption(what + ": line without '=': " + line);
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    uint64_t u = 0;
    bool num = ParseU64(v, &u), ok = true;
    int f = -1;
    if (k == "kind") {
      f = kKind;
      ok = v == "data" || v == "parity";
      m->kind = v == "data" ? PieceMeta::kData : PieceMeta::kParity;
    } else if (k == "name") f = kName, m->name = v;
    else if (k == "version") f = kVersion, ok = num && u > 0, m->version = u;
    else if (k == "iteration") {
      f = kIteration;
      bool neg = !v.empty() && v[0] == '-';
      ok = ParseU64(neg ? v.substr(1) : v, &u) && u <= static_cast<uint64_t>(INT64_MAX);
      m->iteration = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
    } else if (k == "parent_version") f = kParent, ok = num, m->parent_version = u;
    else if (k == "ranks") f = kRanks, ok = num && u >= 1 && u <= UINT32_MAX, m->ranks = static_cast<uint32_t>(u);
    else if (k == "rank") f = kRank, ok = num && u <= UINT32_MAX, m->rank = static_cast<uint32_t>(u);
    else if (k == "host") f = kHost, ok = SafeComponent(v), m->host = v;
    else if (k == "holder_host") f = kHolder, ok = SafeComponent(v), m->holder_host = v;
    else if (k == "length") f = kLength, ok = num, m->length = u;
    else if (k == "data_checksum") f = kDataSum, ok = ParseHex(v, &m->checksum);
    else if (k == "key") m->keys.push_back(v);
    else if (v2 && (k == "dist" || k == "replicated")) ok = m->layouts.ParseLine(k, v);
    else if (k == "parity") f = kParity, ok = num && u >= 1 && u < 255, m->parity = static_cast<int>(u);
    else if (k == "members") f = kMembers, ok = ParseList(v, false, &m->members);
    else if (k == "block") f = kBlock, ok = num, m->block = u;
    else if (k == "lengths") f = kLengths, ok = ParseList(v, false, &m->lengths);
    else if (k == "checksums") f = kSums, ok = ParseList(v, true, &m->checksums);
    else if (k == "parity_length") f = kPLen, ok = num, m->parity_length = u;
    else if (k == "parity_checksum") f = kPSum, ok = ParseHex(v, &m->parity_checksum);
    else ok = false;
    if (!ok) return Status::Corruption(what + ": bad line: " + line);
    if (f >= 0) {
      if (seen[f]) return Status::Corruption(what + ": field '" + k + "' appears twice");
      seen[f] = true;
    }
  }
  for (int f : {kKind, kName, kVersion, kIteration, kParent, kRanks, kRank, kHost, kHolder})
    if (!seen[f]) return Status::Corruption(what + ": a required field is missing");
  if (m->rank >= m->ranks) return Status::Corruption(what + ": rank " + std::to_string(m->rank) + " of " +
                                                     std::to_string(m->ranks) + " ranks");
  if (m->kind == PieceMeta::kData) {
    if (!seen[kLength] || !seen[kDataSum]) return Status::Corruption(what + ": data piece without length/checksum");
    Status ls = m->layouts.Check(what, m->ranks, m->keys);
    if (!ls.ok()) return ls;
  } else {
    for (int f : {kParity, kMembers, kBlock, kLengths, kSums, kPLen, kPSum})
      if (!seen[f]) return Status::Corruption(what + ": parity piece misses a field");
    const size_t g = m->members.size();
    if (g < static_cast<size_t>(m->parity) + 1 || m->lengths.size() != g || m->checksums.size() != g ||
        m->MemberIndex(m->rank) < 0 || m->parity_length != static_cast<uint64_t>(m->parity) * m->block)
      return Status::Corruption(what + ": inconsistent group description");
    for (uint32_t r : m->members)
      if (r >= m->ranks) return Status::Corruption(what + ": group member " + std::to_string(r) + " out of range");
    std::vector<uint32_t> sorted = m->members;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return Status::Corruption(what + ": a group member appears twice");
  }
  return Status::OK();
}

LocalStore::LocalStore(Env* env, std::string root, std::string host, std::string id)
    : env_(env), root_(std::move(root)), host_(std::move(host)), id_(std::move(id)) {
  dir_ = root_ + "/" + host_ + "/" + id_;
}

std::string LocalStore::MakeId(const std::string& name, const std::string& global_dir) {
  return name + "-" + Hex(Checksum64(global_dir.data(), global_dir.size()));
}

std::string LocalStore::VersionDir(uint64_t v) const { return dir_ + "/v-" + std::to_string(v); }

Status LocalStore::WritePiece(const PieceMeta& m, const void* data, size_t n) {
  return WritePiece(m, std::vector<Span>{{data, n}});
}

Status LocalStore::WritePiece(const PieceMeta& m, const std::vector<Span>& spans) {
  const std::string vdir = VersionDir(m.version), path = vdir + "/" + m.FileName();
  Status s = CreateDirs(env_, vdir);
  std::unique_ptr<WritableFile> f;
  // A stale meta of an earlier attempt must not describe the new bytes while they are written.
  if (s.ok() && env_->FileExists(path + kMetaSuffix)) s = env_->DeleteFile(path + kMetaSuffix);
  // A recycled file if there is one (several ranks of a node may race for it: rename is atomic, the loser
  // tries the next one).
  bool recycled = false;
  std::vector<std::string> spare;
  if (s.ok() && env_->GetChildren(dir_ + "/recycle", &spare).ok())
    for (const std::string& r : spare)
      if (env_->RenameFile(dir_ + "/recycle/" + r, path).ok()) {
        recycled = true;
        break;
      }
  if (s.ok()) s = recycled ? env_->NewRecycledFile(path, &f) : env_->NewWritableFile(path, &f);
  for (size_t i = 0; s.ok() && i < spans.size(); ++i)
    if (spans[i].size) s = f->Append(spans[i].data, spans[i].size);
  if (s.ok()) s = f->Sync();
  if (s.ok()) s = f->Close();
  if (s.ok()) s = WriteFileAtomic(env_, path + kMetaSuffix, EncodePieceMeta(m));
  return s;
}

Status LocalStore::ReadPiece(const PieceMeta& m, std::string* out) const {
  const std::string path = PiecePath(m.version, m);
  uint64_t size = 0;
  Status s = env_->GetFileSize(path, &size);
  if (!s.ok()) return s;
  if (size != m.FileLength())
    return Status::Corruption(path + ": " + std::to_string(size) + " bytes, its description says " +
                              std::to_string(m.FileLength()) + " (truncated or overwritten)");
  std::unique_ptr<SequentialFile> f;
  s = env_->NewSequentialFile(path, &f);
  if (!s.ok()) return s;
  out->resize(size);
  size_t at = 0;
  while (at < size) {
    size_t got = 0;
    s = f->Read(out->data() + at, size - at, &got);
    if (!s.ok()) return s;
    if (got == 0) return Status::Corruption(path + ": shorter than its size while read");
    at += got;
  }
  if (Checksum64(out->data(), out->size()) != m.FileChecksum())
    return Status::Corruption(path + ": checksum mismatch (the piece is damaged)");
  return Status::OK();
}

Status LocalStore::ListVersions(std::vector<uint64_t>* out) const {
  return ListVersionNumbers(env_, dir_, out);
}

Status LocalStore::Scan(std::vector<PieceMeta>* metas, std::vector<std::string>* problems) const {
  metas->clear();
  std::vector<uint64_t> versions;
  Status s = ListVersions(&versions);
  if (!s.ok()) return s;
  for (uint64_t v : versions) {
    std::vector<std::string> names;
    const std::string vdir = VersionDir(v);
    if (!env_->GetChildren(vdir, &names).ok()) continue;
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      if (n.size() <= 5 || n.compare(n.size() - 5, 5, kMetaSuffix) != 0) continue;
      const std::string path = vdir + "/" + n;
      std::string text;
      PieceMeta m;
      Status r = ReadFileToString(env_, path, &text);
      if (r.ok()) r = DecodePieceMeta(path, text, &m);
      if (r.ok() && (m.version != v || m.FileName() + kMetaSuffix != n || m.holder_host != host_))
        r = Status::Corruption(path + ": describes " + m.FileName() + " of version " + std::to_string(m.version) +
                               " held on " + m.holder_host + ", not this file");
      if (!r.ok()) {
        if (problems) problems->push_back(r.ToString());
        continue;
      }
      metas->push_back(std::move(m));
    }
  }
  return Status::OK();
}

Status LocalStore::RemoveVersion(uint64_t v) {
  const std::string vdir = VersionDir(v);
  std::vector<std::string> names;
  Status s = env_->GetChildren(vdir, &names);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return s;
  for (const auto& n : names)  // descriptions first
    if (n.size() > 5 && n.compare(n.size() - 5, 5, kMetaSuffix) == 0) {
      s = env_->DeleteFile(vdir + "/" + n);
      if (!s.ok()) return s;
    }
  // Then the pieces go to the recycle directory (up to 16 files: a node's pieces of one or two versions).
  std::vector<std::string> spare;
  const std::string rdir = dir_ + "/recycle";
  if (env_->GetChildren(rdir, &spare).IsNotFound() && !env_->CreateDir(rdir).ok()) spare.assign(16, "");
  for (const auto& n : names) {
    if (spare.size() >= 16 || (n.compare(0, 5, "rank-") != 0 && n.compare(0, 7, "parity-") != 0)) continue;
    const std::string to = rdir + "/" + std::to_string(v) + "." + n;
    if (env_->RenameFile(vdir + "/" + n, to).ok()) spare.push_back(to);
  }
  return DeleteDirTree(env_, vdir);
}

LocalStore::Mapping::~Mapping() {
  if (data) ::munmap(const_cast<char*>(data), size);
}

// mmap has no Env counterpart: a fault-injecting Env covers the writes, and a mapping is only ever read.
Status LocalStore::MapPiece(const PieceMeta& m, std::shared_ptr<const Mapping>* out) const {
  const std::string path = PiecePath(m.version, m);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno("stat " + path, e);
  }
  if (static_cast<uint64_t>(st.st_size) != m.FileLength()) {
    ::close(fd);
    return Status::Corruption(path + ": " + std::to_string(st.st_size) + " bytes, its description says " +
                              std::to_string(m.FileLength()) + " (truncated or overwritten)");
  }
  auto map = std::make_shared<Mapping>();
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno("mmap " + path, e);
    }
    map->data = static_cast<const char*>(p);
    map->size = static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  *out = std::move(map);
  return Status::OK();
}

Status LocalStore::RemoveOlderThan(uint64_t oldest_kept) {
  std::vector<uint64_t> versions;
  Status s = ListVersions(&versions);
  for (uint64_t v : versions) {
    if (!s.ok() || v >= oldest_kept) break;
    s = RemoveVersion(v);
  }
  return s;
}

}  // namespace revive::storage
