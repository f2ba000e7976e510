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

#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "coord/tparity.h"
#include "coord/tstream.h"
#include "core/env.h"
#include "storage/erasure.h"
#include "storage/stripes.h"

namespace revive::coord {
namespace {

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

Status SendList(const std::string& addr, const std::string& to, const std::string& secret, uint64_t gen,
                const std::string& from, const std::vector<TlxFile>& files, double timeout_s) {
  const std::string who = "parity group member " + to + " (" + addr + ")";
  TFd s;
  Status st = addr == "-" ? Status::NotFound(who + ": no exchange address") : TlxConnect(addr, secret, timeout_s, &s.fd);
  if (!st.ok()) return st;
  std::string msg = "tlenc 1 " + std::to_string(gen) + " " + from + " list " + std::to_string(files.size()) + "\n";
  for (const auto& f : files) msg += f.name + " " + std::to_string(f.size) + " " + Hex64(f.xxh3) + "\n";
  if (!(st = TlxWrite(s.fd, msg.data(), msg.size(), who)).ok()) return st;
  return TReadAck(s.fd, who);
}

Status SendBlocks(const std::string& addr, const std::string& to, const std::string& secret, uint64_t gen,
                  const std::string& from, const TMemberData& data, const std::vector<Range>& ranges, double timeout_s,
                  uint64_t* sent) {
  const std::string who = "parity group member " + to + " (" + addr + ")";
  TFd s;
  Status st = TlxConnect(addr, secret, timeout_s, &s.fd);
  if (!st.ok()) return st;
  std::string head = "tlenc 1 " + std::to_string(gen) + " " + from + " blocks " + std::to_string(Total(ranges)) + "\n";
  if (!(st = TlxWrite(s.fd, head.data(), head.size(), who)).ok()) return st;
  std::unique_ptr<char[]> buf(new char[kTChunk]);
  THash h;
  for (const Range& r : ranges)
    for (uint64_t off = 0; off < r.len; off += kTChunk) {
      const size_t n = (size_t)std::min<uint64_t>(kTChunk, r.len - off);
      if (!(st = data.Read(r.off + off, n, buf.get())).ok()) return st;
      h.Add(buf.get(), n);
      if (!(st = TlxWrite(s.fd, buf.get(), n, who)).ok()) return st;
      *sent += n;
    }
  const std::string tail = Hex64(h.Digest()) + "\n";
  if (!(st = TlxWrite(s.fd, tail.data(), tail.size(), who)).ok()) return st;
  return TReadAck(s.fd, who);
}

// The holder's side: what the other members sent on its listener.
struct Peers {
  std::vector<bool> have_list;
  std::vector<std::vector<TlxFile>> lists;
  std::vector<std::unique_ptr<TFd>> blocks;  // the open block streams, by member
  std::vector<uint64_t> block_bytes;        // as announced
  std::vector<std::string> who;
  size_t n_lists = 0, n_blocks = 0;
};

// Accepts one connection and reads what it carries: a list (answered at once) or the head of a block
// stream (kept open in peers->blocks).
Status AcceptOne(int listen_fd, const std::string& secret, uint64_t gen, const std::vector<std::string>& hosts,
                 size_t me, double timeout_s, Peers* peers) {
  TFd s;
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
    peers->blocks[j] = std::make_unique<TFd>(s.fd);
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
  const size_t piece = (size_t)std::min<uint64_t>(kTChunk, std::max<uint64_t>(B, 64));
  std::unique_ptr<uint8_t, decltype(&free)> mem((uint8_t*)aligned_alloc(64, piece * (size_t)(k + 1)), &free);
  if (mem == nullptr) return Status::IOError("out of memory for the parity encode");
  std::vector<const uint8_t*> in((size_t)k);
  uint8_t* out = mem.get() + piece * (size_t)k;
  std::vector<std::unique_ptr<THash>> hs;
  for (int j = 0; j < g; j++) hs.push_back(std::make_unique<THash>());
  const std::string tmp = dir + "/parity.tmp", dst = dir + "/parity";
  TFd f(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (f.fd < 0) return Status::FromErrno("create " + tmp, errno);
  THash ph;
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
                          const std::string& dir, TEncodeStats* stats, const std::vector<bool>* writers) {
  const size_t g = hosts.size();
  if (g < 2 || addrs.size() != g || me >= g || m < 1 || (size_t)m >= g || xxh3.size() != paths.size() ||
      (writers != nullptr && writers->size() != g))
    return Status::InvalidArgument("parity group of " + std::to_string(g) + " hosts, m=" + std::to_string(m) +
                                   ": not a group this host can encode");
  auto writes = [&](size_t j) { return writers == nullptr || (*writers)[j]; };
  TEncodeStats local;
  if (stats == nullptr) stats = &local;
  *stats = TEncodeStats();
  TMemberData data;
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
      if (j != me && writes(j))
        threads.emplace_back([&, j] {
          sent[j] = SendBlocks(addrs[j], hosts[j], secret, gen, hosts[me], data,
                               RangesFor(layout, len, (int)me, (int)j), timeout_s, &sent_bytes[j]);
        });
  while (st.ok() && writes(me) && peers.n_blocks + 1 < g)
    st = AcceptOne(listen_fd, secret, gen, hosts, me, timeout_s, &peers);
  for (size_t j = 0; j < g && st.ok() && writes(me); j++) {
    if (j == me) continue;
    const uint64_t want = Total(RangesFor(layout, len, (int)j, (int)me));
    if (peers.block_bytes[j] != want)
      st = Status::Corruption(peers.who[j] + ": announces " + std::to_string(peers.block_bytes[j]) +
                              " bytes of blocks, its list says " + std::to_string(want));
    stats->received += want;
  }
  TParityMeta meta;
  if (st.ok() && writes(me)) st = EncodeStreams(layout, len, me, &peers, dir, &meta.parity_xxh3);
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
  if (!st.ok() || !writes(me)) return st;
  meta.g = (int)g;
  meta.m = m;
  meta.block = layout.block_size();
  for (size_t j = 0; j < g; j++) meta.members.push_back({hosts[j], peers.lists[j]});
  return WriteFileAtomic(Env::Default(), dir + "/parity.meta", meta.Serialize());
}

}  // namespace revive::coord
