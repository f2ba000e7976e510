#include "coord/tparity.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <sstream>

#include <xxhash.h>

#include "coord/tlevels.h"
#include "core/env.h"
#include "storage/erasure.h"
#include "storage/stripes.h"

namespace revive::coord {
namespace {

std::string Base(const std::string& p) { return p.substr(p.find_last_of('/') + 1); }

// A member's data: its files concatenated in the order given, read straight into one buffer (one copy:
// at checkpoint time every byte of the group passes through here).
Status Concat(const std::vector<std::string>& paths, std::string* data, std::vector<TlxFile>* files) {
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (const std::string& p : paths) {
    uint64_t n = 0;
    Status s = Env::Default()->GetFileSize(p, &n);
    if (!s.ok()) return s;
    sizes.push_back(n);
    total += n;
  }
  data->resize(total);
  uint64_t off = 0;
  for (size_t i = 0; i < paths.size(); i++) {
    int fd = open(paths[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(paths[i], errno);
    uint64_t got = 0;
    while (got < sizes[i]) {
      ssize_t r = read(fd, data->data() + off + got, sizes[i] - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        int e = r < 0 ? errno : EIO;
        close(fd);
        return Status::FromErrno("read " + paths[i] + (r == 0 ? " (shrank)" : ""), e);
      }
      got += (uint64_t)r;
    }
    close(fd);
    files->push_back({Base(paths[i]), sizes[i], XXH3_64bits(data->data() + off, sizes[i])});
    off += sizes[i];
  }
  return Status::OK();
}

}  // namespace

uint64_t TParityMeta::Member::Length() const {
  uint64_t n = 0;
  for (const auto& f : images) n += f.size;
  return n;
}

std::string TParityMeta::Serialize() const {
  std::string s = "revive-tparity 1\n" + std::to_string(g) + " " + std::to_string(m) + " " + std::to_string(block) + "\n";
  for (const auto& mb : members) {
    s += "member " + mb.host + " " + std::to_string(mb.images.size()) + "\n";
    for (const auto& f : mb.images) s += f.name + " " + std::to_string(f.size) + " " + Hex64(f.xxh3) + "\n";
  }
  return s + "parity " + Hex64(parity_xxh3) + "\n";
}

Status TParityMeta::Parse(const std::string& text, const std::string& where, TParityMeta* out) {
  std::istringstream in(text);
  std::string magic, ver, word;
  auto bad = [&](const std::string& why) { return Status::Corruption(where + ": " + why); };
  if (!(in >> magic >> ver) || magic != "revive-tparity" || ver != "1") return bad("not a parity description");
  *out = TParityMeta();
  if (!(in >> out->g >> out->m >> out->block) || out->g < 2 || out->m < 1 || out->m >= out->g) return bad("bad layout line");
  for (int j = 0; j < out->g; j++) {
    Member mb;
    size_t n = 0;
    if (!(in >> word >> mb.host >> n) || word != "member" || n > 100000) return bad("bad member line");
    for (size_t i = 0; i < n; i++) {
      TlxFile f;
      std::string x;
      if (!(in >> f.name >> f.size >> x) || !ParseHex64(x, &f.xxh3)) return bad("bad image line of " + mb.host);
      mb.images.push_back(f);
    }
    out->members.push_back(mb);
  }
  std::string x;
  if (!(in >> word >> x) || word != "parity" || !ParseHex64(x, &out->parity_xxh3)) return bad("bad parity line");
  return Status::OK();
}

Status TEncodeGroup(const std::vector<std::string>& hosts, const std::vector<std::vector<std::string>>& files_of,
                    int m, size_t me, const std::string& dir) {
  const int g = (int)hosts.size();
  TParityMeta meta;
  meta.g = g;
  meta.m = m;
  std::vector<std::string> data((size_t)g);
  uint64_t lmax = 0;
  for (int j = 0; j < g; j++) {
    std::vector<std::string> paths = files_of[(size_t)j];
    std::sort(paths.begin(), paths.end(), [](const std::string& a, const std::string& b) { return Base(a) < Base(b); });
    TParityMeta::Member mb;
    mb.host = hosts[(size_t)j];
    Status s = Concat(paths, &data[(size_t)j], &mb.images);
    if (!s.ok()) return s;
    lmax = std::max<uint64_t>(lmax, data[(size_t)j].size());
    meta.members.push_back(mb);
  }
  std::unique_ptr<storage::ErasureCode> code;
  Status s = storage::ErasureCode::Make(g - m, m, &code);
  if (!s.ok()) return s;
  storage::StripeLayout layout(g, m, lmax);
  meta.block = layout.block_size();
  std::vector<std::string_view> views(data.begin(), data.end());
  std::vector<std::string> parity;
  if (!(s = storage::EncodeGroupFor(*code, layout, views, (int)me, &parity)).ok()) return s;
  meta.parity_xxh3 = XXH3_64bits(parity[me].data(), parity[me].size());
  if (!(s = WriteFileAtomic(Env::Default(), dir + "/parity", parity[me])).ok()) return s;
  return WriteFileAtomic(Env::Default(), dir + "/parity.meta", meta.Serialize());
}

}  // namespace revive::coord
