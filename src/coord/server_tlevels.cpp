// Multi-level storage of transparent images in the coordinator tree (tlevels.h; docs/storage-levels.md,
// "Transparent images"). The root decides which levels a generation goes to (REVIVE_LEVELS) and, for each
// sub-coordinator (one per host), tells it in every PHASE of the checkpoint barrier where its processes
// write (their host's node-local directory for L1) and, for L2, whose copy it keeps and where its own
// copy goes (the partner's exchange address, published by that sub as "tl.p.<host>"), and for L3 its
// group (the members' addresses, "tl.x.<host>"). Each sub, once its processes wrote their images, computes
// their checksums and, for L2, sends them to its partner's sub over TCP (tlx.h) while it receives the copy
// it keeps, then, for L3 (alone or with L2), encodes the group's parity with the other members (tencode.h),
// all on a thread of its own while its loop keeps serving; only then does it answer the image phase, so the
// root writes MANIFEST.json (recording levels, hosts, partners, groups, checksums) only when every host's
// images and copies are durable. With --fork the images come in
// phase durable, after the program resumed, and the exchange happens there. After a successful resume (with
// --fork: once the root says the manifest is written) each sub copies its images to the checkpoint directory
// in the background when the generation also goes to L4, and prunes old generations per level.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "coord/log.h"
#include "coord/server.h"
#include "coord/server_conn.h"
#include "coord/tencode.h"
#include "coord/tlevels.h"
#include "coord/tlx.h"
#include "core/env.h"

namespace revive::coord {
namespace {
constexpr double kExchangeTimeout = 30;  // a partner that sends nothing this long failed (the generation fails)
}

// Root, at the start of each attempt: the generation's levels, and the partner ring over the hosts of the
// participating sub-coordinators (the library's placement rule, hosts as failure domains).
void Server::TLevelsBegin() {
  cur_levels_ = 0;
  tl_here_ = false;
  tl_partner_.clear();
  tl_from_.clear();
  if (!o_.parent.empty()) return;
  unsigned lv = tl_.LevelsFor(cur_gen_);
  if (!(lv & kTL1)) return;
  std::vector<std::string> hosts;
  for (uint64_t id : participants_) {
    auto it = conns_.find(id);
    if (it != conns_.end() && it->second->role == Conn::Role::kSub) hosts.push_back(it->second->host);
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (hosts.empty() && (lv & (kTL2 | kTL3))) {  // `revive launch` refuses such a policy; a restart here may not
    Log(1, "generation %llu: REVIVE_LEVELS=%s: partner copies (L2) and parity (L3) need other hosts (--hosts); this "
        "one-host computation writes to the checkpoint directory", (unsigned long long)cur_gen_, tl_.spec.c_str());
    return;
  }
  if (hosts.empty()) {  // one host, no sub-coordinator: the root is the host's part (L1, and L4 in the background)
    for (uint64_t id : participants_) {
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second->role != Conn::Role::kProc || it->second->Self() == nullptr) continue;
      const std::string d = TLocalGenDir(tl_.local_root, it->second->Self()->host, TJobId(o_.ckpt_dir), cur_gen_);
      if (Status s = CreateDirs(Env::Default(), d); !s.ok()) {  // the processes create only the last component
        FailGeneration("REVIVE_LEVELS=" + tl_.spec + ": cannot create " + d + ": " + s.ToString());
        return;
      }
    }
    tl_here_ = true;
  }
  if (lv & kTL2) {
    std::vector<size_t> partner;
    Status s = hosts.size() < 2 ? Status::InvalidArgument("partner copies (L2) need at least two hosts, the "
                                                          "computation runs on " + hosts[0] + " only")
                                : THostPartners(hosts, &partner);
    if (!s.ok()) {
      FailGeneration("REVIVE_LEVELS=" + tl_.spec + ": " + s.message());
      return;
    }
    for (size_t i = 0; i < hosts.size(); i++) {
      tl_partner_[hosts[i]] = hosts[partner[i]];
      tl_from_[hosts[partner[i]]] = hosts[i];
    }
  }
  tl_group_.clear();
  if (lv & kTL3) {
    std::vector<std::vector<std::string>> groups;
    Status s = THostGroups(hosts, tl_.group_size, tl_.parity, &groups);
    if (!s.ok()) {
      FailGeneration("REVIVE_LEVELS=" + tl_.spec + ": parity groups over hosts: " + s.message());
      return;
    }
    for (const auto& g : groups)
      for (const auto& h : g) tl_group_[h] = g;
    manifest_.parity = (uint64_t)tl_.parity;
  }
  cur_levels_ = lv;
  manifest_.levels = TLevelNames(lv);
  manifest_.local_root = tl_.local_root;
  manifest_.job = TJobId(o_.ckpt_dir);
}

// Root: what a sub-coordinator is told in a checkpoint PHASE (its processes' directory in *dir).
void Server::TLevelsPhaseFields(Conn* c, FrameBuilder* b, std::string* dir) {
  if (state_ != State::kCheckpoint || !(cur_levels_ & kTL1)) return;
  if (tl_here_ && c->role == Conn::Role::kProc && c->Self() != nullptr) {
    *dir = TLocalGenDir(tl_.local_root, c->Self()->host, TJobId(o_.ckpt_dir), cur_gen_);
    return;
  }
  if (c->role != Conn::Role::kSub) return;
  *dir = TLocalGenDir(tl_.local_root, c->host, TJobId(o_.ckpt_dir), cur_gen_);
  b->add("tl.levels", TLevelNames(cur_levels_).c_str()).add("tl.host", c->host.c_str());
  b->add_u64("tl.keep", (uint64_t)tl_.keep);
  if (cur_levels_ & kTL3) {
    std::string members, addrs;
    for (const auto& h : tl_group_[c->host]) {
      auto a = kv_.find("tl.x." + h);
      members += (members.empty() ? "" : ",") + h;
      addrs += (addrs.empty() ? "" : ",") + (a == kv_.end() ? std::string("-") : a->second);
    }
    b->add("tl.group", members.c_str()).add("tl.group_addrs", addrs.c_str()).add_u64("tl.parity", (uint64_t)tl_.parity);
  }
  if (!(cur_levels_ & kTL2)) return;
  const std::string& partner = tl_partner_[c->host];
  auto addr = kv_.find("tl.p." + partner);
  b->add("tl.partner", partner.c_str()).add("tl.partner_addr", addr == kv_.end() ? "" : addr->second.c_str());
  b->add("tl.from", tl_from_[c->host].c_str());
}

// Root: a sub's image of a generation with levels is on its host, not here (no stat: the root cannot see
// node-local storage); its checksum came with the report.
bool Server::TLevelsAddImage(Conn* c, const Payload& p, const std::string& pre, ManifestProc* mp) {
  if (!(cur_levels_ & kTL1)) return false;
  if (tl_here_ && c->role == Conn::Role::kProc && c->Self() != nullptr) {  // one host: the root checksums the image where it was written
    char image[4096] = "";
    p.get_str((pre + "image").c_str(), image, sizeof image);
    std::string file = image;
    file = TLocalGenDir(tl_.local_root, c->Self()->host, TJobId(o_.ckpt_dir), cur_gen_) + "/" +
           file.substr(file.find_last_of('/') + 1);
    if (Status s = FileXxh3(file, &mp->xxh3); !s.ok()) {
      FailGeneration(c->Describe() + " reported image \"" + std::string(image) + "\": " + s.ToString());
      return true;
    }
    mp->local = true;
    return true;
  }
  if (c->role != Conn::Role::kSub) return false;
  char x[32] = "";
  p.get_str((pre + "xxh3").c_str(), x, sizeof x);
  if (!ParseHex64(x, &mp->xxh3)) {
    FailGeneration(c->Describe() + " reported no checksum for upid " + std::to_string(mp->upid));
    return true;
  }
  mp->local = true;
  if (cur_levels_ & kTL2) mp->l2 = tl_partner_[c->host];
  for (const auto& h : tl_group_[c->host]) mp->l3 += (mp->l3.empty() ? "" : ",") + h;
  return true;
}

// Root of a one-host computation, at a successful resume: what a sub does (SubTLevelsResumed) for this host.
void Server::TLevelsResumedHere() {
  if (!tl_here_) return;
  std::vector<std::string> images, hostjobs;
  for (const auto& p : manifest_.procs) {
    images.push_back(TLocalGenDir(tl_.local_root, p.host, manifest_.job, cur_gen_) + "/" + p.image);
    hostjobs.push_back(THostJobDir(tl_.local_root, p.host, manifest_.job));
  }
  std::sort(hostjobs.begin(), hostjobs.end());
  hostjobs.erase(std::unique(hostjobs.begin(), hostjobs.end()), hostjobs.end());
  std::erase_if(tl_background_, [](auto& b) {  // those finished: joining them frees their stacks
    if (!b.second->load()) return false;
    b.first.join();
    return true;
  });
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([levels = cur_levels_, gen = cur_gen_, keep = (size_t)tl_.keep, images, hostjobs,
                 ckpt_dir = o_.ckpt_dir, done] {
    TFlushAndPrune(levels, gen, images, hostjobs, ckpt_dir, keep);
    done->store(true);
  });
  tl_background_.emplace_back(std::move(t), std::move(done));
}

// Root, --fork: a forked generation's images (and their partner copies and parity) became durable in phase
// durable, after the program resumed, and the manifest was written only then; the subs learn it here
// (PHASE published, which nobody answers) and start their background L4 copy and pruning, as they do at the
// resume of a checkpoint without --fork. A forked generation that failed sends nothing: its host parts
// neither copy nor prune (the next complete generation does).
void Server::TLevelsPublished() {
  if (!(cur_levels_ & kTL1) || tl_here_) return;
  uint8_t buf[512];
  for (const auto& [id, c] : conns_) {
    if (c->dead || c->role != Conn::Role::kSub) continue;
    FrameBuilder b(buf, sizeof buf, kPhase, 0);
    b.add("name", "published").add_u64("generation", cur_gen_).add("barrier", "checkpoint");
    Send(c.get(), b);
  }
}

// Sub, --fork: the root wrote the manifest of the generation whose images this host exchanged in phase durable.
void Server::SubTLevelsPublished(const Payload& p) {
  uint64_t gen = 0;
  p.get_u64("generation", &gen);
  if (gen != 0 && gen == up_->tl.gen) SubTLevelsResumed();
}

// Sub: the exchange listener, published to the root for the other hosts' subs.
void Server::SubTLevelsListen() {
  const char* h = getenv("REVIVE_HOST_ID");
  up_->host = h != nullptr ? h : "";
  if (up_->host.empty()) return;
  uint16_t port = 0;
  // The other hosts reach us where the root does: with --bind 0.0.0.0, the local address of our root link.
  std::string ip = o_.bind;
  sockaddr_in me{};
  socklen_t len = sizeof me;
  char ipbuf[INET_ADDRSTRLEN] = "";
  if (ip == "0.0.0.0" && getsockname(up_->client.fd(), (sockaddr*)&me, &len) == 0 &&
      inet_ntop(AF_INET, &me.sin_addr, ipbuf, sizeof ipbuf) != nullptr)
    ip = ipbuf;
  for (auto [fd, key] : {std::pair{&up_->tlx_fd, "tl.x."}, std::pair{&up_->tlp_fd, "tl.p."}}) {
    Status s = TlxListen(o_.bind, fd, &port);
    if (!s.ok()) {
      Log(1, "sub: no image exchange listener: %s", s.ToString().c_str());
      return;
    }
    std::string k = key + up_->host, value = ip + ":" + std::to_string(port);
    uint8_t buf[1024];
    FrameBuilder b(buf, sizeof buf, kPublish, 0);
    b.add("key", k.c_str()).add("value", value.c_str());
    if (size_t n = b.finish()) SendUp(kPublish, 0, (const char*)buf + kHeaderSize, n - kHeaderSize);
  }
}

// Sub: the root's instructions in a checkpoint PHASE.
void Server::SubTLevelsPhase(const Payload& p) {
  auto& tl = up_->tl;
  if (up_->restart) return;
  char v[4096] = "";
  uint64_t gen = 0;
  p.get_u64("generation", &gen);
  if (up_->phase == "suspend") tl = Upstream::TL();
  if (!p.get_str("tl.levels", v, sizeof v)) return;
  tl.levels = ParseTLevelNames(v);
  tl.gen = gen;
  p.get_str("dir", v, sizeof v);
  tl.dir = v;
  if (p.get_str("tl.partner", v, sizeof v)) tl.partner = v;
  if (p.get_str("tl.partner_addr", v, sizeof v)) tl.partner_addr = v;
  if (p.get_str("tl.from", v, sizeof v)) tl.from = v;
  uint64_t m = 1;
  if (p.get_str("tl.group", v, sizeof v)) tl.group = TSplitList(v);
  if (p.get_str("tl.group_addrs", v, sizeof v)) tl.group_addrs = TSplitList(v);
  if (p.get_u64("tl.parity", &m)) tl.parity = (int)m;
  if (p.get_u64("tl.keep", &m) && m >= 1) tl.keep = (int)m;
  if (up_->phase == "write") {  // the processes create only the last component
    Status s = CreateDirs(Env::Default(), tl.dir);
    if (!s.ok() && !up_->failed) {
      up_->failed = true;
      up_->error = "host " + up_->host + ": cannot create " + tl.dir + ": " + s.ToString();
    }
  }
}

// Sub, when its processes answered the image phase: the checksums, the L2 exchange with the partner and the
// L3 encode start on the exchange thread (TLevelsExchangeJob), on copies of what they need; the loop goes on
// serving the processes, and SubTLevelsExchangeDone answers the phase once the thread is done.
void Server::SubTLevelsExchange() {
  auto& ex = up_->ex;
  if (ex.thread.joinable()) ex.thread.join();  // an abandoned attempt's, still running: its timeouts bound it
  uint64_t n = 0;
  (void)!read(ex.done_fd, &n, sizeof n);  // and its wakeup, if it is still pending
  ex.finished = false;
  ex.phase = up_->phase;
  ex.tl = up_->tl;
  ex.tl.xxh.clear();
  ex.images.clear();
  for (const auto& im : up_->images) ex.images.push_back(im.image);
  ex.host = up_->host;
  ex.secret = secret_;
  ex.tlx_fd = up_->tlx_fd;
  ex.tlp_fd = up_->tlp_fd;
  ex.error.clear();
  ex.thread = std::thread([up = up_.get()] {
    up->ex.error = TLevelsExchangeJob(up);
    up->ex.finished = true;
    uint64_t one = 1;
    (void)!write(up->ex.done_fd, &one, sizeof one);
  });
}

// Sub, the loop, when the exchange thread wrote its eventfd: its result, and the answer to the image phase,
// unless the root moved on meanwhile (a new phase began: that attempt's result is dropped).
void Server::SubTLevelsExchangeDone() {
  auto& ex = up_->ex;
  uint64_t n = 0;
  (void)!read(ex.done_fd, &n, sizeof n);
  if (!ex.finished || !ex.thread.joinable()) return;
  ex.thread.join();
  ex.finished = false;
  if (up_->in_phase || up_->phase != ex.phase || up_->tl.gen != ex.tl.gen) {
    Log(1, "sub: dropping the result of generation %llu's image exchange: the barrier moved on",
        (unsigned long long)ex.tl.gen);
    return;
  }
  up_->tl.xxh = ex.tl.xxh;
  if (!ex.error.empty() && !up_->failed) up_->error = "host " + up_->host + ": " + ex.error;
  if (!ex.error.empty()) up_->failed = true;
  SubAnswerPhase(/*levels=*/true);
}

// The exchange thread: checksums, the L2 exchange with the partners, and the L3 encode (TLevelsEncodeJob)
// when the generation goes there too. Touches up->ex only. "" or why it failed.
std::string Server::TLevelsExchangeJob(Upstream* up) {
  auto& ex = up->ex;
  auto& tl = ex.tl;
  const std::vector<std::string>& paths = ex.images;
  if (!(tl.levels & (kTL2 | kTL3))) {
    for (const auto& p : paths) {
      uint64_t h = 0;
      Status s = FileXxh3(p, &h);
      if (!s.ok()) return s.ToString();
      tl.xxh[p] = h;
    }
    return "";
  }
  if (!(tl.levels & kTL2)) return TLevelsEncodeJob(up);
  if (tl.partner_addr.empty() || ex.tlp_fd < 0) return "no image exchange address for partner host " + tl.partner;
  const double t0 = MonotonicSeconds();
  Status sent;
  std::vector<TlxFile> files;
  std::thread sender([&] { sent = TlxSend(tl.partner_addr, ex.secret, tl.gen, ex.host, paths, &files, kExchangeTimeout); });
  Status got = Status::OK();
  std::vector<TlxFile> received;
  if (!tl.from.empty())
    got = TlxReceive(ex.tlp_fd, ex.secret, tl.gen, tl.from, tl.dir + "/partner-" + tl.from, kExchangeTimeout, &received);
  sender.join();
  if (!sent.ok()) return "copy to partner host " + tl.partner + ": " + sent.ToString();
  if (!got.ok()) return "copy from host " + tl.from + ": " + got.ToString();
  for (size_t i = 0; i < files.size() && i < paths.size(); i++) tl.xxh[paths[i]] = files[i].xxh3;
  Log(2, "generation %llu: %zu image(s) sent to %s, %zu received from %s in %.3f s", (unsigned long long)tl.gen,
      files.size(), tl.partner.c_str(), received.size(), tl.from.c_str(), MonotonicSeconds() - t0);
  // L2 and L3: the partner copies first (every host does, on its own listener, so no host waits for another's
  // parity exchange), then the group's.
  return (tl.levels & kTL3) ? TLevelsEncodeJob(up) : "";
}

// The exchange thread, L3: the distributed encode (tencode.h): this host sends each block of its images to
// the m members keeping the parity of that block's stripe and computes its own parity slots from the blocks
// the others send it, about m times its data on the wire and through memory in bounded pieces (the
// all-to-all copy this replaced moved g - 1 times it and wrote it to disk first). Touches up->ex only.
std::string Server::TLevelsEncodeJob(Upstream* up) {
  auto& ex = up->ex;
  auto& tl = ex.tl;
  const size_t g = tl.group.size();
  size_t me = std::find(tl.group.begin(), tl.group.end(), ex.host) - tl.group.begin();
  if (me == g || tl.group_addrs.size() != g || ex.tlx_fd < 0) return "no parity group for this host";
  std::vector<uint64_t> sums;
  for (const auto& p : ex.images) {
    uint64_t h = 0;
    Status s = tl.xxh.count(p) ? Status::OK() : FileXxh3(p, &h);  // known after an L2 exchange
    if (!s.ok()) return s.ToString();
    if (!tl.xxh.count(p)) tl.xxh[p] = h;
    sums.push_back(tl.xxh[p]);
  }
  const double t0 = MonotonicSeconds();
  TEncodeStats st;
  Status s = TEncodeDistributed(tl.group, tl.group_addrs, me, ex.images, sums, tl.parity, ex.tlx_fd, ex.secret, tl.gen,
                                kExchangeTimeout, tl.dir, &st);
  if (!s.ok()) return "parity: " + s.ToString();
  Log(2, "generation %llu: parity of group %zu hosts encoded in %.3f s (%llu block bytes sent, %llu received)",
      (unsigned long long)tl.gen, g, MonotonicSeconds() - t0, (unsigned long long)st.sent,
      (unsigned long long)st.received);
  return "";
}

// Sub, at a successful resume: the background L4 copy, then pruning per level: this host's old local
// generations, and the checkpoint directory's (every host does it after its copy; TPruneGlobal).
void Server::SubTLevelsResumed() {
  auto tl = up_->tl;
  if (!(tl.levels & kTL1)) return;
  std::vector<std::string> images;
  for (const auto& [path, h] : tl.xxh) images.push_back(path);
  const std::string ckpt_dir = o_.ckpt_dir;
  const std::string hostjob = tl.dir.substr(0, tl.dir.find_last_of('/'));
  up_->background.emplace_back([tl, images, ckpt_dir, hostjob] {
    TFlushAndPrune(tl.levels, tl.gen, images, {hostjob}, ckpt_dir, (size_t)tl.keep);
  });
}

}  // namespace revive::coord
