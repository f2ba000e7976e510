#include "coord/tencode.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <xxhash.h>

#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "coord/tparity.h"
#include "core/env.h"
#include "storage/erasure.h"
#include "storage/stripes.h"

namespace revive::coord {
namespace {

// Blocks travel and are coded in pieces of this many bytes (a multiple of 64): a holder's memory is
// (k + 1) pieces, a sender's one per holder, whatever the images' sizes.
constexpr size_t kChunk = 1 << 20;

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

struct Hash {
  XXH3_state_t* s = XXH3_createState();
  Hash() { XXH3_64bits_reset(s); }
  Hash(const Hash&) = delete;
  Hash& operator=(const Hash&) = delete;
  ~Hash() { XXH3_freeState(s); }
  void Add(const void* p, size_t n) { XXH3_64bits_update(s, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(s); }
};

std::string Base(const std::string& p) { return p.substr(p.find_last_of('/') + 1); }

// A member's data: its images concatenated in name order (as TEncodeGroup orders them), read by offset;
// pread, so the sender threads share the descriptors.
class MemberData {
 public:
  Status Open(const std::vector<std::string>& paths, const std::vector<uint64_t>& xxh3, std::vector<TlxFile>* files) {
    std::vector<size_t> order(paths.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return Base(paths[a]) < Base(paths[b]); });
    for (size_t i : order) {
      auto f = std::make_unique<Fd>(open(paths[i].c_str(), O_RDONLY | O_CLOEXEC));
      struct stat sb;
      if (f->fd < 0 || fstat(f->fd, &sb) != 0) return Status::FromErrno(paths[i], errno);
      paths_.push_back(paths[i]);
      start_.push_back(size_);
      size_ += (uint64_t)sb.st_size;
      files->push_back({Base(paths[i]), (uint64_t)sb.st_size, xxh3[i]});
      fds_.push_back(std::move(f));
    }
    return Status::OK();
  }
  uint64_t size() const { return size_; }

  Status Read(uint64_t off, size_t n, char* out) const {
    size_t f = std::upper_bound(start_.begin(), start_.end(), off) - start_.begin() - 1;
    while (n > 0) {
      const uint64_t end = f + 1 < start_.size() ? start_[f + 1] : size_;
      const size_t want = (size_t)std::min<uint64_t>(n, end - off);
      ssize_t r = want == 0 ? 0 : pread(fds_[f]->fd, out, want, (off_t)(off - start_[f]));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno("read " + paths_[f], errno);
      if (r == 0 && want > 0) return Status::IOError("read " + paths_[f] + ": shrank while encoded");
      if (r == 0) {  // an empty image: the next one
        f++;
        continue;
      }
      off += (uint64_t)r;
      out += r;
      n -= (size_t)r;
      if (off == end) f++;
    }
    return Status::OK();
  }

 private:
  std::vector<std::unique_ptr<Fd>> fds_;
  std::vector<std::string> paths_;
  std::vector<uint64_t> start_;
  uint64_t size_ = 0;
};

struct Range {
  uint64_t off, len;
};

// What holder i receives from member j, in the order i reads it: for each of i's parity slots, j's block
// of that stripe when j is one of its data members, only the bytes below j's length (the rest is padding).
std::vector<Range> RangesFor(const storage::StripeLayout& l, const std::vector<uint64_t>& len, int j, int i) {
  std::vector<Range> out;
  const uint64_t B = l.block_size();
  for (auto [s, t] : l.parity_slots(i))
    for (auto [mem, b] : l.data_blocks(s))
      if (mem == j && (uint64_t)b * B < len[(size_t)j])
        out.push_back({(uint64_t)b * B, std::min(B, len[(size_t)j] - (uint64_t)b * B)});
  return out;
}

uint64_t Total(const std::vector<Range>& r) {
  uint64_t n = 0;
  for (const auto& x : r) n += x.len;
  return n;
}

Status ReadAck(int fd, const std::string& who) {
  std::string ack;
  Status st = TlxReadLine(fd, &ack, who + " (answer)");
  if (st.ok() && ack != "OK") st = Status::IOError(who + ": " + ack);
  return st;
}

Status SendList(const std::string& addr, const std::string& to, const std::string& secret, uint64_t gen,
                const std::string& from, const std::vector<TlxFile>& files, double timeout_s) {
  const std::string who = "parity group member " + to + " (" + addr + ")";
  Fd s;
  Status st = addr == "-" ? Status::NotFound(who + ": no exchange address") : TlxConnect(addr, secret, timeout_s, &s.fd);
  if (!st.ok()) return st;
  std::string msg = "tlenc 1 " + std::to_string(gen) + " " + from + " list " + std::to_string(files.size()) + "\n";
  for (const auto& f : files) msg += f.name + " " + std::to_string(f.size) + " " + Hex64(f.xxh3) + "\n";
  if (!(st = TlxWrite(s.fd, msg.data(), msg.size(), who)).ok()) return st;
  return ReadAck(s.fd, who);
}

Status SendBlocks(const std::string& addr, const std::string& to, const std::string& secret, uint64_t gen,
                  const std::string& from, const MemberData& data, const std::vector<Range>& ranges, double timeout_s,
                  uint64_t* sent) {
  const std::string who = "parity group member " + to + " (" + addr + ")";
  Fd s;
  Status st = TlxConnect(addr, secret, timeout_s, &s.fd);
  if (!st.ok()) return st;
  std::string head = "tlenc 1 " + std::to_string(gen) + " " + from + " blocks " + std::to_string(Total(ranges)) + "\n";
  if (!(st = TlxWrite(s.fd, head.data(), head.size(), who)).ok()) return st;
  std::unique_ptr<char[]> buf(new char[kChunk]);
  Hash h;
  for (const Range& r : ranges)
    for (uint64_t off = 0; off < r.len; off += kChunk) {
      const size_t n = (size_t)std::min<uint64_t>(kChunk, r.len - off);
      if (!(st = data.Read(r.off + off, n, buf.get())).ok()) return st;
      h.Add(buf.get(), n);
      if (!(st = TlxWrite(s.fd, buf.get(), n, who)).ok()) return st;
      *sent += n;
    }
  const std::string tail = Hex64(h.Digest()) + "\n";
  if (!(st = TlxWrite(s.fd, tail.data(), tail.size(), who)).ok()) return st;
  return ReadAck(s.fd, who);
}

// The holder's side: what the other members sent on its listener.
struct Peers {
  std::vector<bool> have_list;
  std::vector<std::vector<TlxFile>> lists;
  std::vector<std::unique_ptr<Fd>> blocks;  // the open block streams, by member
  std::vector<uint64_t> block_bytes;        // as announced
  std::vector<std::string> who;
  size_t n_lists = 0, n_blocks = 0;
};

// Accepts one connection and reads what it carries: a list (answered at once) or the head of a block
// stream (kept open in peers->blocks).
Status AcceptOne(int listen_fd, const std::string& secret, uint64_t gen, const std::vector<std::string>& hosts,
                 size_t me, double timeout_s, Peers* peers) {
  Fd s;
  std::string who;
  Status st = TlxAccept(listen_fd, secret, timeout_s, &s.fd, &who);
  if (!st.ok()) return st;
  auto refuse = [&](const std::string& why) { return TlxRefuse(s.fd, who, why); };
  std::string line;
  if (!(st = TlxReadLine(s.fd, &line, who)).ok()) return st;
  char from[256] = "", kind[16] = "";
  unsigned long long g = 0, n = 0;
  if (sscanf(line.c_str(), "tlenc 1 %llu %255s %15s %llu", &g, from, kind, &n) != 4)
    return refuse("bad parity exchange header \"" + line + "\"");
  if (g != gen) return refuse("sends generation " + std::to_string(g) + ", expected " + std::to_string(gen));
  const size_t j = std::find(hosts.begin(), hosts.end(), std::string(from)) - hosts.begin();
  if (j == hosts.size() || j == me) return refuse(std::string("host ") + from + " is not another member of the group");
  who = "parity group member " + std::string(from) + " (" + who.substr(who.rfind(' ') + 1) + ")";
  const bool list = strcmp(kind, "list") == 0;
  if (!list && strcmp(kind, "blocks") != 0) return refuse(std::string("unknown message \"") + kind + "\"");
  if (list ? peers->have_list[j] : peers->blocks[j] != nullptr) return refuse(std::string("sent its ") + kind + " twice");
  if (!list) {
    peers->blocks[j] = std::make_unique<Fd>(s.fd);
    s.fd = -1;
    peers->block_bytes[j] = n;
    peers->who[j] = who;
    peers->n_blocks++;
    return Status::OK();
  }
  if (n > 100000) return refuse("lists " + std::to_string(n) + " images");
  for (unsigned long long i = 0; i < n; i++) {
    if (!(st = TlxReadLine(s.fd, &line, who)).ok()) return st;
    char name[512] = "", x[32] = "";
    TlxFile f;
    unsigned long long size = 0;
    if (sscanf(line.c_str(), "%511s %llu %31s", name, &size, x) != 3 || name[0] == '.' || strchr(name, '/') != nullptr ||
        !ParseHex64(x, &f.xxh3))
      return refuse("bad image line \"" + line + "\"");
    f.name = name;
    f.size = size;
    peers->lists[j].push_back(f);
  }
  peers->have_list[j] = true;
  peers->n_lists++;
  return TlxWrite(s.fd, "OK\n", 3, who);
}

// Reads the block streams in the order the layout gives and writes this member's parity to dir/parity
// (atomically), *parity_xxh3 its checksum. Each stream's checksum is checked; no block is held whole.
Status EncodeStreams(const storage::StripeLayout& l, const std::vector<uint64_t>& len, size_t me, Peers* peers,
                     const std::string& dir, uint64_t* parity_xxh3) {
  std::unique_ptr<storage::ErasureCode> code;
  Status st = storage::ErasureCode::Make(l.k(), l.m(), &code);
  if (!st.ok()) return st;
  const int g = l.g(), k = l.k();
  const uint64_t B = l.block_size();
  const size_t piece = (size_t)std::min<uint64_t>(kChunk, std::max<uint64_t>(B, 64));
  std::unique_ptr<uint8_t, decltype(&free)> mem((uint8_t*)aligned_alloc(64, piece * (size_t)(k + 1)), &free);
  if (mem == nullptr) return Status::IOError("out of memory for the parity encode");
  std::vector<const uint8_t*> in((size_t)k);
  uint8_t* out = mem.get() + piece * (size_t)k;
  std::vector<std::unique_ptr<Hash>> hs;
  for (int j = 0; j < g; j++) hs.push_back(std::make_unique<Hash>());
  const std::string tmp = dir + "/parity.tmp", dst = dir + "/parity";
  Fd f(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (f.fd < 0) return Status::FromErrno("create " + tmp, errno);
  Hash ph;
  for (auto [s, t] : l.parity_slots((int)me)) {
    const auto db = l.data_blocks(s);
    for (uint64_t off = 0; off < B && st.ok(); off += piece) {
      const size_t n = (size_t)std::min<uint64_t>(piece, B - off);
      for (int p = 0; p < k && st.ok(); p++) {
        const auto [j, b] = db[(size_t)p];
        uint8_t* buf = mem.get() + piece * (size_t)p;
        const uint64_t at = (uint64_t)b * B + off;
        const size_t real = at >= len[(size_t)j] ? 0 : (size_t)std::min<uint64_t>(n, len[(size_t)j] - at);
        st = TlxRead(peers->blocks[(size_t)j]->fd, buf, real, peers->who[(size_t)j]);
        hs[(size_t)j]->Add(buf, real);
        memset(buf + real, 0, n - real);
        in[(size_t)p] = buf;
      }
      if (!st.ok()) break;
      code->EncodeOne(n, in.data(), t, out);
      ph.Add(out, n);
      for (size_t done = 0; done < n && st.ok();) {
        ssize_t r = write(f.fd, out + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) st = Status::FromErrno("write " + tmp, errno);
        else done += (size_t)r;
      }
    }
    if (!st.ok()) break;
  }
  for (int j = 0; j < g && st.ok(); j++) {
    if ((size_t)j == me) continue;
    std::string tail;
    uint64_t said = 0;
    st = TlxReadLine(peers->blocks[(size_t)j]->fd, &tail, peers->who[(size_t)j]);
    if (st.ok() && (!ParseHex64(tail, &said) || said != hs[(size_t)j]->Digest()))
      st = Status::Corruption(peers->who[(size_t)j] + ": its blocks arrived with checksum " + tail + ", computed " +
                              Hex64(hs[(size_t)j]->Digest()));
  }
  if (st.ok() && fsync(f.fd) != 0) st = Status::FromErrno("fsync " + tmp, errno);
  if (st.ok() && rename(tmp.c_str(), dst.c_str()) != 0) st = Status::FromErrno("rename " + tmp, errno);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  *parity_xxh3 = ph.Digest();
  return Env::Default()->SyncDir(dir);
}

}  // namespace

Status TEncodeDistributed(const std::vector<std::string>& hosts, const std::vector<std::string>& addrs, size_t me,
                          const std::vector<std::string>& paths, const std::vector<uint64_t>& xxh3, int m,
                          int listen_fd, const std::string& secret, uint64_t gen, double timeout_s,
                          const std::string& dir, TEncodeStats* stats) {
  const size_t g = hosts.size();
  if (g < 2 || addrs.size() != g || me >= g || m < 1 || (size_t)m >= g || xxh3.size() != paths.size())
    return Status::InvalidArgument("parity group of " + std::to_string(g) + " hosts, m=" + std::to_string(m) +
                                   ": not a group this host can encode");
  TEncodeStats local;
  if (stats == nullptr) stats = &local;
  *stats = TEncodeStats();
  MemberData data;
  Peers peers;
  peers.have_list.assign(g, false);
  peers.lists.resize(g);
  peers.blocks.resize(g);
  peers.block_bytes.assign(g, 0);
  peers.who.resize(g);
  Status st = data.Open(paths, xxh3, &peers.lists[me]);
  if (!st.ok()) return st;
  std::vector<Status> sent(g);
  std::vector<uint64_t> sent_bytes(g, 0);
  std::vector<std::thread> threads;
  for (size_t j = 0; j < g; j++)
    if (j != me)
      threads.emplace_back([&, j] {
        sent[j] = SendList(addrs[j], hosts[j], secret, gen, hosts[me], peers.lists[me], timeout_s);
      });
  // Every list first (the layout's block size depends on the largest member), then every block stream;
  // block streams that arrive while lists are still missing wait, open, in peers.blocks.
  while (st.ok() && peers.n_lists + 1 < g) st = AcceptOne(listen_fd, secret, gen, hosts, me, timeout_s, &peers);
  std::vector<uint64_t> len(g, 0);
  for (size_t j = 0; j < g; j++)
    for (const auto& f : peers.lists[j]) len[j] += f.size;
  const storage::StripeLayout layout((int)g, m, st.ok() ? *std::max_element(len.begin(), len.end()) : 0);
  for (auto& t : threads) t.join();  // the lists are acknowledged at once: no wait on the block streams
  threads.clear();
  for (size_t j = 0; j < g && st.ok(); j++)
    if (!sent[j].ok()) st = sent[j];
  if (st.ok())
    for (size_t j = 0; j < g; j++)
      if (j != me)
        threads.emplace_back([&, j] {
          sent[j] = SendBlocks(addrs[j], hosts[j], secret, gen, hosts[me], data,
                               RangesFor(layout, len, (int)me, (int)j), timeout_s, &sent_bytes[j]);
        });
  while (st.ok() && peers.n_blocks + 1 < g) st = AcceptOne(listen_fd, secret, gen, hosts, me, timeout_s, &peers);
  for (size_t j = 0; j < g && st.ok(); j++) {
    if (j == me) continue;
    const uint64_t want = Total(RangesFor(layout, len, (int)j, (int)me));
    if (peers.block_bytes[j] != want)
      st = Status::Corruption(peers.who[j] + ": announces " + std::to_string(peers.block_bytes[j]) +
                              " bytes of blocks, its list says " + std::to_string(want));
    stats->received += want;
  }
  TParityMeta meta;
  if (st.ok()) st = EncodeStreams(layout, len, me, &peers, dir, &meta.parity_xxh3);
  for (size_t j = 0; j < g; j++) {  // the senders learn whether their blocks arrived whole
    if (peers.blocks[j] == nullptr) continue;
    const std::string a = st.ok() ? "OK\n" : "ERR " + st.ToString() + "\n";
    (void)!send(peers.blocks[j]->fd, a.data(), a.size(), MSG_NOSIGNAL);
    peers.blocks[j].reset();  // closed: a sender still writing fails now, not at its timeout
  }
  for (auto& t : threads) t.join();
  for (size_t j = 0; j < g; j++) stats->sent += sent_bytes[j];
  for (size_t j = 0; j < g && st.ok(); j++)
    if (!sent[j].ok()) st = sent[j];
  if (!st.ok()) return st;
  meta.g = (int)g;
  meta.m = m;
  meta.block = layout.block_size();
  for (size_t j = 0; j < g; j++) meta.members.push_back({hosts[j], peers.lists[j]});
  return WriteFileAtomic(Env::Default(), dir + "/parity.meta", meta.Serialize());
}

}  // namespace revive::coord
