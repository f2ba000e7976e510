#include "coord/trebuild.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "coord/tparity.h"
#include "coord/tstream.h"
#include "core/env.h"
#include "storage/erasure.h"
#include "storage/stripes.h"

namespace revive::coord {
namespace {

// What both ends derive from the group's description and the list of unusable members.
struct Plan {
  TParityMeta meta;
  std::unique_ptr<storage::StripeLayout> layout;
  int lost = -1;
  std::vector<bool> usable;  // by member: neither the lost one nor unusable
  std::vector<uint64_t> len;

  Status Make(const TParityMeta& m, const std::string& lost_host, const std::vector<std::string>& unusable,
              const std::string& where) {
    meta = m;
    for (int j = 0; j < m.g; j++) {
      const auto& h = m.members[(size_t)j].host;
      len.push_back(m.members[(size_t)j].Length());
      if (h == lost_host) lost = j;
      usable.push_back(h != lost_host && std::find(unusable.begin(), unusable.end(), h) == unusable.end());
    }
    if (lost < 0) return Status::InvalidArgument(lost_host + " is not a member of the group described in " + where);
    const int missing = (int)std::count(usable.begin(), usable.end(), false);
    if (missing > m.m)
      return Status::InvalidArgument("the group described in " + where + " lost " + std::to_string(missing) +
                                     " members, its parity tolerates " + std::to_string(m.m));
    layout = std::make_unique<storage::StripeLayout>(m.g, m.m, *std::max_element(len.begin(), len.end()));
    if (layout->block_size() != m.block)
      return Status::Corruption(where + ": block size " + std::to_string(m.block) + ", its layout gives " +
                                std::to_string(layout->block_size()));
    return Status::OK();
  }
  int k() const { return layout->k(); }
  uint64_t B() const { return layout->block_size(); }
  // The member at code position p of stripe s (data positions, then parity) and, for data, its block.
  std::pair<int, int> At(int s, int p) const {
    if (p < k()) return layout->data_blocks(s)[(size_t)p];
    return {layout->parity_holder(s, p - k()), -1};
  }
  // The bytes of position p of stripe s on the wire from offset off of the block, n at most: a data block
  // stops at its member's length (the rest is padding), a parity block is whole.
  size_t Real(int s, int p, uint64_t off, size_t n) const {
    const auto [j, b] = At(s, p);
    if (b < 0) return n;
    const uint64_t at = (uint64_t)b * B() + off;
    return at >= len[(size_t)j] ? 0 : (size_t)std::min<uint64_t>(n, len[(size_t)j] - at);
  }
  bool Needed(int s) const {
    for (int p = 0; p < layout->g(); p++)
      if (At(s, p).first == lost) return Real(s, p, 0, 1) > 0;
    return false;
  }
  std::vector<int> Sources(int s) const {
    std::vector<int> out;
    for (int p = 0; p < layout->g() && (int)out.size() < k(); p++)
      if (usable[(size_t)At(s, p).first]) out.push_back(p);
    return out;
  }
  // Block bytes member j sends.
  uint64_t BytesFrom(int j) const {
    uint64_t n = 0;
    for (int s = 0; s < layout->g(); s++)
      if (Needed(s))
        for (int p : Sources(s))
          if (At(s, p).first == j) n += Real(s, p, 0, B());
    return n;
  }
};

std::string Layout(TParityMeta m) {  // the description without the member's own parity checksum
  m.parity_xxh3 = 0;
  return m.Serialize();
}

Status WriteAll(int fd, const char* p, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno("write " + what, errno);
    p += r;
    n -= (size_t)r;
  }
  return Status::OK();
}

// The lost member's images written in order as their bytes come, each to dest/.NAME.tmp, checked against
// its checksum when complete; Commit renames them.
class ImagesOut {
 public:
  ImagesOut(const std::vector<TlxFile>& files, const std::string& dest, const std::string& host)
      : files_(files), dest_(dest), host_(host) {}
  ~ImagesOut() {
    for (size_t i = 0; i < files_.size(); i++) unlink(Tmp(i).c_str());
  }
  Status Add(const char* p, size_t n) {
    while (true) {
      Status s = Finish();
      if (!s.ok() || n == 0) return s;
      if (cur_ == files_.size()) return Status::Corruption("rebuilt data of host " + host_ + " longer than its images");
      if (fd_ == nullptr) {
        fd_ = std::make_unique<TFd>(open(Tmp(cur_).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        if (fd_->fd < 0) return Status::FromErrno("create " + Tmp(cur_), errno);
        hash_ = std::make_unique<THash>();
      }
      const size_t take = (size_t)std::min<uint64_t>(n, files_[cur_].size - done_);
      if (!(s = WriteAll(fd_->fd, p, take, Tmp(cur_))).ok()) return s;
      hash_->Add(p, take);
      done_ += take;
      p += take;
      n -= take;
    }
  }
  Status Commit() {
    Status s = Finish();
    if (s.ok() && cur_ != files_.size()) s = Status::Corruption("rebuilt data of host " + host_ + " shorter than its images");
    for (size_t i = 0; i < files_.size() && s.ok(); i++)
      if (rename(Tmp(i).c_str(), (dest_ + "/" + files_[i].name).c_str()) != 0) s = Status::FromErrno("rename " + Tmp(i), errno);
    return s;
  }

 private:
  std::string Tmp(size_t i) const { return dest_ + "/." + files_[i].name + ".tmp"; }
  // Closes every complete image (empty ones too), checked and fsync'd.
  Status Finish() {
    while (cur_ < files_.size() && done_ == files_[cur_].size) {
      if (fd_ == nullptr) {  // empty: nothing was written
        fd_ = std::make_unique<TFd>(open(Tmp(cur_).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        if (fd_->fd < 0) return Status::FromErrno("create " + Tmp(cur_), errno);
        hash_ = std::make_unique<THash>();
      }
      if (hash_->Digest() != files_[cur_].xxh3)
        return Status::Corruption("rebuilt " + files_[cur_].name + " of host " + host_ + " does not match its checksum");
      if (fsync(fd_->fd) != 0) return Status::FromErrno("fsync " + Tmp(cur_), errno);
      fd_.reset();
      cur_++;
      done_ = 0;
    }
    return Status::OK();
  }

  const std::vector<TlxFile>& files_;
  std::string dest_, host_;
  size_t cur_ = 0;
  uint64_t done_ = 0;
  std::unique_ptr<TFd> fd_;
  std::unique_ptr<THash> hash_;
};

struct Stream {
  std::unique_ptr<TFd> fd;
  std::string who;
  uint64_t bytes = 0;  // announced
  std::unique_ptr<THash> hash = std::make_unique<THash>();
};

// Accepts one survivor and reads its header and description.
Status AcceptSurvivor(int listen_fd, const std::string& secret, uint64_t gen, double timeout_s, std::string* from,
                      std::string* meta_text, Stream* out) {
  auto fd = std::make_unique<TFd>();
  std::string who, line;
  Status st = TlxAccept(listen_fd, secret, timeout_s, &fd->fd, &who);
  if (st.ok()) st = TlxReadLine(fd->fd, &line, who);
  if (!st.ok()) return st;
  char host[256] = "";
  unsigned long long g = 0, mlen = 0, n = 0;
  if (sscanf(line.c_str(), "tlreb 1 %llu %255s %llu %llu", &g, host, &mlen, &n) != 4 || mlen > (64u << 20))
    return TlxRefuse(fd->fd, who, "bad rebuild header \"" + line + "\"");
  *from = host;
  out->who = "parity group member " + *from + " (" + who.substr(who.rfind(' ') + 1) + ")";
  if (g != gen)
    return TlxRefuse(fd->fd, out->who, "sends generation " + std::to_string(g) + ", expected " + std::to_string(gen));
  meta_text->resize(mlen);
  if (!(st = TlxRead(fd->fd, meta_text->data(), mlen, out->who)).ok()) return st;
  out->fd = std::move(fd);
  out->bytes = n;
  return Status::OK();
}

// Reads the sources' streams stripe by stripe and writes the lost member's images and parity.
Status Decode(const Plan& plan, std::vector<Stream>& streams, const std::string& dest, uint64_t* parity_xxh3) {
  std::unique_ptr<storage::ErasureCode> code;
  Status st = storage::ErasureCode::Make(plan.k(), plan.meta.m, &code);
  if (!st.ok()) return st;
  const int g = plan.meta.g, L = plan.lost;
  const uint64_t B = plan.B();
  const size_t piece = (size_t)std::min<uint64_t>(kTChunk, std::max<uint64_t>(B, 64));
  std::unique_ptr<uint8_t, decltype(&free)> mem((uint8_t*)aligned_alloc(64, piece * (size_t)g), &free);
  if (mem == nullptr) return Status::IOError("out of memory for the rebuild");
  std::vector<uint8_t*> blocks((size_t)g);
  for (int p = 0; p < g; p++) blocks[(size_t)p] = mem.get() + piece * (size_t)p;
  const std::string& host = plan.meta.members[(size_t)L].host;
  ImagesOut images(plan.meta.members[(size_t)L].images, dest, host);
  const std::string ptmp = dest + "/parity.tmp";
  TFd pf(open(ptmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (pf.fd < 0) return Status::FromErrno("create " + ptmp, errno);
  THash ph;
  for (int s = 0; s < g && st.ok(); s++) {
    if (!plan.Needed(s)) continue;
    const std::vector<int> src = plan.Sources(s);
    int mine = -1;  // L's position in this stripe
    for (int p = 0; p < g; p++)
      if (plan.At(s, p).first == L) mine = p;
    for (uint64_t off = 0; off < B && st.ok(); off += piece) {
      const size_t n = (size_t)std::min<uint64_t>(piece, B - off);
      std::vector<bool> present((size_t)g, false);
      for (int p : src) {
        Stream& in = streams[(size_t)plan.At(s, p).first];
        const size_t real = plan.Real(s, p, off, n);
        if (!(st = TlxRead(in.fd->fd, blocks[(size_t)p], real, in.who)).ok()) break;
        in.hash->Add(blocks[(size_t)p], real);
        memset(blocks[(size_t)p] + real, 0, n - real);
        present[(size_t)p] = true;
      }
      if (st.ok()) st = code->Reconstruct(n, blocks.data(), present);
      if (!st.ok()) break;
      if (mine >= plan.k()) {
        ph.Add(blocks[(size_t)mine], n);
        st = WriteAll(pf.fd, (const char*)blocks[(size_t)mine], n, ptmp);
      } else {
        st = images.Add((const char*)blocks[(size_t)mine], plan.Real(s, mine, off, n));
      }
    }
  }
  for (size_t j = 0; j < streams.size() && st.ok(); j++) {
    if (streams[j].fd == nullptr) continue;
    std::string tail;
    uint64_t said = 0;
    st = TlxReadLine(streams[j].fd->fd, &tail, streams[j].who);
    if (st.ok() && (!ParseHex64(tail, &said) || said != streams[j].hash->Digest()))
      st = Status::Corruption(streams[j].who + ": its blocks arrived with checksum " + tail + ", computed " +
                              Hex64(streams[j].hash->Digest()));
  }
  if (st.ok()) st = images.Commit();
  if (st.ok() && fsync(pf.fd) != 0) st = Status::FromErrno("fsync " + ptmp, errno);
  if (st.ok() && rename(ptmp.c_str(), (dest + "/parity").c_str()) != 0) st = Status::FromErrno("rename " + ptmp, errno);
  if (!st.ok()) unlink(ptmp.c_str());
  *parity_xxh3 = ph.Digest();
  return st;
}

}  // namespace

Status TRebuildSend(const std::string& addr, const std::string& secret, uint64_t gen, const std::string& from_host,
                    const std::string& dir, const std::string& lost, const std::vector<std::string>& unusable,
                    double timeout_s, TRebuildStats* stats) {
  TRebuildStats local;
  if (stats == nullptr) stats = &local;
  *stats = TRebuildStats();
  std::string text;
  TParityMeta meta;
  Plan plan;
  Status st = ReadFileToString(Env::Default(), dir + "/parity.meta", &text);
  if (st.ok()) st = TParityMeta::Parse(text, dir + "/parity.meta", &meta);
  if (st.ok()) st = plan.Make(meta, lost, unusable, dir + "/parity.meta");
  if (!st.ok()) return st;
  int me = -1;
  for (int j = 0; j < meta.g; j++)
    if (meta.members[(size_t)j].host == from_host) me = j;
  if (me < 0 || !plan.usable[(size_t)me])
    return Status::InvalidArgument("host " + from_host + " is not a surviving member of the group described in " + dir +
                                   "/parity.meta");
  std::vector<std::string> paths;
  std::vector<uint64_t> xxh;
  for (const auto& f : meta.members[(size_t)me].images) {
    paths.push_back(dir + "/" + f.name);
    xxh.push_back(f.xxh3);
  }
  TMemberData data, parity;
  std::vector<TlxFile> files;
  if (!(st = data.Open(paths, xxh, &files)).ok() || !(st = parity.Open({dir + "/parity"}, {0}, &files)).ok()) return st;
  if (data.size() != plan.len[(size_t)me] || parity.size() != (uint64_t)meta.m * plan.B())
    return Status::Corruption(dir + ": the images or parity of host " + from_host + " do not have the sizes parity.meta gives");
  const std::string who = "rebuilder of host " + lost + " (" + addr + ")";
  TFd s;
  if (!(st = TlxConnect(addr, secret, timeout_s, &s.fd)).ok()) return st;
  const uint64_t total = plan.BytesFrom(me);
  const std::string head = "tlreb 1 " + std::to_string(gen) + " " + from_host + " " + std::to_string(text.size()) + " " +
                           std::to_string(total) + "\n" + text;
  if (!(st = TlxWrite(s.fd, head.data(), head.size(), who)).ok()) return st;
  const auto slots = plan.layout->parity_slots(me);
  std::unique_ptr<char[]> buf(new char[kTChunk]);
  THash h;
  for (int stripe = 0; stripe < meta.g && st.ok(); stripe++) {
    if (!plan.Needed(stripe)) continue;
    for (int p : plan.Sources(stripe)) {
      const auto [j, b] = plan.At(stripe, p);
      if (j != me) continue;
      const TMemberData& from = b >= 0 ? data : parity;
      uint64_t base = (uint64_t)b * plan.B();
      if (b < 0)
        base = (uint64_t)(std::find(slots.begin(), slots.end(), std::make_pair(stripe, p - plan.k())) - slots.begin()) *
               plan.B();
      const uint64_t n = plan.Real(stripe, p, 0, plan.B());
      for (uint64_t off = 0; off < n && st.ok(); off += kTChunk) {
        const size_t c = (size_t)std::min<uint64_t>(kTChunk, n - off);
        if (!(st = from.Read(base + off, c, buf.get())).ok()) break;
        h.Add(buf.get(), c);
        st = TlxWrite(s.fd, buf.get(), c, who);
        stats->received += c;
      }
    }
  }
  if (!st.ok()) return st;
  const std::string tail = Hex64(h.Digest()) + "\n";
  if (!(st = TlxWrite(s.fd, tail.data(), tail.size(), who)).ok()) return st;
  return TReadAck(s.fd, who);
}

Status TRebuildReceive(int listen_fd, const std::string& secret, uint64_t gen, const std::string& lost,
                       const std::vector<std::string>& unusable, const std::string& dest_dir, double timeout_s,
                       TRebuildStats* stats) {
  TRebuildStats local;
  if (stats == nullptr) stats = &local;
  *stats = TRebuildStats();
  Plan plan;
  std::vector<Stream> streams;
  std::string first;  // the first survivor's description, without its own parity checksum
  Status st;
  for (int expected = 1, got = 0; st.ok() && got < expected;) {
    std::string from, text;
    Stream in;
    if (!(st = AcceptSurvivor(listen_fd, secret, gen, timeout_s, &from, &text, &in)).ok()) break;
    TParityMeta meta;
    if (!(st = TParityMeta::Parse(text, in.who + "'s parity.meta", &meta)).ok()) break;
    if (got == 0) {
      if (!(st = plan.Make(meta, lost, unusable, in.who + "'s parity.meta")).ok()) break;
      first = Layout(meta);
      expected = (int)std::count(plan.usable.begin(), plan.usable.end(), true);
      streams.resize((size_t)meta.g);
    } else if (Layout(meta) != first) {
      st = TlxRefuse(in.fd->fd, in.who, "describes another group or layout than the first member did");
      break;
    }
    int j = -1;
    for (int x = 0; x < meta.g; x++)
      if (meta.members[(size_t)x].host == from) j = x;
    if (j < 0 || !plan.usable[(size_t)j] || streams[(size_t)j].fd != nullptr) {
      st = TlxRefuse(in.fd->fd, in.who, "is not a surviving member of the group, or sent twice");
      break;
    }
    if (in.bytes != plan.BytesFrom(j)) {
      st = TlxRefuse(in.fd->fd, in.who, "announces " + std::to_string(in.bytes) + " bytes of blocks, the layout gives " +
                                            std::to_string(plan.BytesFrom(j)));
      break;
    }
    stats->received += in.bytes;
    streams[(size_t)j] = std::move(in);
    got++;
  }
  stats->sources = (int)std::count_if(streams.begin(), streams.end(), [](const Stream& x) { return x.fd != nullptr; });
  TParityMeta meta = plan.meta;
  if (st.ok()) st = CreateDirs(Env::Default(), dest_dir);
  if (st.ok()) st = Decode(plan, streams, dest_dir, &meta.parity_xxh3);
  if (st.ok()) st = WriteFileAtomic(Env::Default(), dest_dir + "/parity.meta", meta.Serialize());
  if (st.ok()) st = Env::Default()->SyncDir(dest_dir);
  for (auto& x : streams) {  // the survivors learn whether the rebuild was written
    if (x.fd == nullptr) continue;
    const std::string a = st.ok() ? "OK\n" : "ERR " + st.ToString() + "\n";
    (void)!send(x.fd->fd, a.data(), a.size(), MSG_NOSIGNAL);
  }
  return st;
}

}  // namespace revive::coord
