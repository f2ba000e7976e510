// Sub-coordinator mode (`revive coordinator --parent HOST:PORT`): DMTCP's two-level tree. Local processes
// connect here exactly as to a coordinator (same secret); we hold one connection to the root (role=sub)
// and relay:
//   local HELLO (proof checked here)  -> root HELLO over our link; the root's WELCOME (upid) comes back
//   root PHASE                         -> every local process of that barrier; one aggregated PHASE_DONE
//                                         up (ok=0 with the first failure; write: p.<i>.upid/image/bytes)
//   local BYE / disconnect             -> root BYE upid=... (the process left)
//   local requests (CKPT_REQUEST, STATUS_REQUEST, LOOKUP, KILL, PUBLISH) -> root, replies back by seq
//   root KILL                          -> every local process
// Losing the root ends the sub-coordinator (its processes then run on without a coordinator).
#include <stdlib.h>
#include <string.h>

#include "coord/log.h"
#include "coord/server.h"
#include "coord/server_conn.h"

namespace revive::coord {

Status Server::ConnectUpstream() {
  std::string host = o_.parent;
  uint16_t port = 7779;
  size_t colon = o_.parent.rfind(':');
  if (colon != std::string::npos) {
    host = o_.parent.substr(0, colon);
    char* end = nullptr;
    long p = strtol(o_.parent.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || p < 1 || p > 65535)
      return Status::InvalidArgument("--parent " + o_.parent + ": bad port");
    port = (uint16_t)p;
  }
  up_ = std::make_unique<Upstream>();
  ClientOptions co;
  co.host = host.c_str();
  co.port = port;
  co.secret_file = o_.secret_file.c_str();
  co.role = "sub";
  co.prog = "revive-sub";
  co.connect_timeout_ms = 10000;
  Welcome w;
  if (!up_->client.connect(co, &w)) return Status::IOError(std::string("root coordinator: ") + up_->client.error());
  // Processes learn where images go from our WELCOME: the root's directory.
  if (w.ckpt_dir[0] == '/') o_.ckpt_dir = w.ckpt_dir;
  generation_ = w.generation;
  o_.compress = w.compress;
  o_.fork = w.fork;
  return Status::OK();
}

bool Server::SendUp(uint16_t type, uint32_t seq, const char* payload, size_t len) {
  if (len > Client::kTxCap - kHeaderSize) {
    Log(0, "sub: frame of %zu bytes too large to relay", len);
    return false;
  }
  uint8_t* tx = up_->client.tx_buffer();
  encode_header(FrameHeader{type, 0, (uint32_t)len, seq}, tx);
  memcpy(tx + kHeaderSize, payload, len);
  if (up_->client.send(tx, kHeaderSize + len)) return true;
  Log(0, "sub: lost the root coordinator: %s", up_->client.error());
  stopping_ = true;
  return false;
}

void Server::SendRaw(Conn* c, uint16_t type, uint32_t seq, const char* payload, size_t len) {
  if (c->dead) return;
  char hdr[kHeaderSize];
  encode_header(FrameHeader{type, 0, (uint32_t)len, seq}, (uint8_t*)hdr);
  c->out.append(hdr, kHeaderSize);
  c->out.append(payload, len);
  OnWritable(c);
}

void Server::SubForwardHello(Conn* c, const FrameHeader& h, const Payload& p) {
  // Keep what the process told us; the upid comes with the root's WELCOME.
  c->members[0] = MemberFromHello(p);
  c->hello_seq = h.seq;
  SubForward(c, h, p);
}

// Sends a local peer's request to the root under a new seq; the reply is relayed back by that seq.
void Server::SubForward(Conn* c, const FrameHeader& h, const Payload& p) {
  uint32_t seq = ++up_->seq;
  if (h.type != kPublish) up_->pending[seq] = {c->id, h.seq};
  SendUp(h.type, seq, p.data(), p.size());
}

void Server::SubHandleFrame(Conn* c, const FrameHeader& h, const Payload& p) {
  switch (h.type) {
    case kCkptRequest:
    case kStatusRequest:
    case kLookup:
    case kPublish:
      SubForward(c, h, p);
      return;
    case kKill:
      if (c->role == Conn::Role::kCli) {
        SubForward(c, h, p);
        return;
      }
      break;
    case kPhaseDone:
      if (c->role == Conn::Role::kProc) {
        SubOnPhaseDone(c, p);
        return;
      }
      break;
    case kBye:
      if (c->role == Conn::Role::kProc) {
        c->said_bye = true;  // a member until its connection closes, as at the root (Server::Handle)
        return;
      }
      break;
    default:
      break;
  }
  std::string why = std::string(msg_type_name(h.type)) + " is not valid from this peer";
  SendError(c, h.seq, why);
  Drop(c, why);
}

void Server::SubPeerGone(Conn* c, const std::string& why) {
  for (const auto& [upid, m] : c->members) {
    if (upid == 0) continue;
    uint8_t buf[512];
    FrameBuilder b(buf, sizeof buf, kBye, 0);
    b.add_u64("upid", upid).add_i64("status", c->said_bye ? 0 : -1);
    if (DeadRank(*c)) b.add_u64("died", 1);  // the root refuses later checkpoints of its MPI job
    if (c->timed_out) b.add("lost", why.substr(0, 200).c_str());  // dropped alive: the root refuses from now on
    if (size_t n = b.finish()) SendUp(kBye, 0, (const char*)buf + kHeaderSize, n - kHeaderSize);
  }
  // As at the root (Server::OnPeerGone): gone before it was suspended, or (--fork) after it resumed but
  // before it reported its image, is transient; gone while suspended is not; gone after its early
  // report is nothing. Between phases too: after resume, a sub waits for the root's durable.
  const bool was_waiting = up_->in_phase && up_->waiting.erase(c->id) > 0;
  const bool early = up_->early.erase(c->id) > 0;
  const bool in_barrier = up_->parts.count(c->id) > 0 && (up_->in_phase || (!up_->restart && o_.fork && up_->phase == "resume"));
  if (in_barrier && !early) {
    const bool resumed = up_->phase == "resume" || up_->phase == "durable";
    bool fails = true, transient = false;
    if (up_->restart) fails = was_waiting;
    else if (up_->phase == "suspend" && DeadRank(*c))
      transient = false;  // an MPI rank: its job is ending, no generation without it (the root refuses)
    else if (up_->phase == "suspend" && was_waiting && (c->said_bye || LeftOnItsOwn(*c))) fails = false;
    else if (up_->phase == "suspend") transient = was_waiting && !c->timed_out;  // see OnPeerGone
    else if (resumed) fails = transient = o_.fork && (up_->phase == "resume" || was_waiting);
    if (fails) {
      if (!up_->failed) up_->error = c->Describe() + " " + why + " during phase " + up_->phase;
      if (!up_->failed) up_->retryable = transient;  // the first failure decides (Server::FailGeneration)
      up_->failed = true;
    }
  }
  if (was_waiting) SubFinishPhaseIfDone();
  up_->parts.erase(c->id);
}

void Server::OnUpstreamReadable() {
  for (;;) {
    FrameHeader h;
    Payload p;
    int r = up_->client.recv(&h, &p, 0);
    if (r == 0) return;
    if (r < 0) {
      Log(0, "sub: lost the root coordinator: %s", up_->client.error());
      stopping_ = true;
      return;
    }
    auto it = up_->pending.find(h.seq);
    if (h.seq != 0 && it != up_->pending.end()) {
      auto [conn_id, local_seq] = it->second;
      // A LOOKUP wait=1 is answered once; everything else too.
      up_->pending.erase(it);
      auto ci = conns_.find(conn_id);
      if (ci == conns_.end() || ci->second->dead) continue;
      Conn* c = ci->second.get();
      if (c->role == Conn::Role::kProc && c->members.count(0) != 0) {  // the answer to its HELLO
        uint64_t upid = 0;
        if (h.type == kWelcome && p.get_u64("upid", &upid) && upid != 0) {
          Member m = c->members[0];
          m.upid = upid;
          m.state = m.awaiting_restart ? "restored" : "running";
          c->members.erase(0);
          c->members[upid] = m;
          ever_had_proc_ = true;  // --exit-on-last: from now on, the last local process leaving ends us
          SendRaw(c, h.type, c->hello_seq, p.data(), p.size());
        } else {
          SendRaw(c, h.type, c->hello_seq, p.data(), p.size());
          c->members.clear();
          Drop(c, "refused by the root coordinator");
        }
        continue;
      }
      SendRaw(c, h.type, local_seq, p.data(), p.size());
      continue;
    }
    if (h.type == kPhase) {
      SubStartPhase(p);
    } else if (h.type == kKill) {
      for (auto& [id, c] : conns_)
        if (!c->dead && c->role == Conn::Role::kProc) SendRaw(c.get(), kKill, 0, "", 0);
    } else if (h.type == kError) {
      char reason[512] = "";
      p.get_str("reason", reason, sizeof reason);
      Log(0, "sub: root coordinator says: %s", reason);
    }
  }
}

void Server::SubStartPhase(const Payload& p) {
  char name[32] = "", barrier[16] = "";
  p.get_str("name", name, sizeof name);
  p.get_str("barrier", barrier, sizeof barrier);
  if (std::string(name) == "published") return SubTLevelsPublished(p);  // not a phase: nobody answers it
  up_->phase = name;
  up_->restart = std::string(barrier) == "restart";
  if (up_->phase == (up_->restart ? "reconnect" : "suspend")) {  // a new barrier: fix its participants
    up_->parts.clear();
    up_->failed = false;
    up_->retryable = false;
    up_->error.clear();
    silent_ = false;  // set by TimeOut when a process here does not answer
    up_->early.clear();
    up_->early_images.clear();
    for (const auto& [id, c] : conns_)
      if (!c->dead && c->role == Conn::Role::kProc && c->HasMembers(up_->restart) && c->members.count(0) == 0)
        up_->parts.insert(id);
  }
  SubTLevelsPhase(p);  // before the processes hear of it: their directory must exist
  if (!up_->restart && up_->phase == "resume" && !o_.fork) {  // --fork: the images come after it (published)
    char ok[4] = "";
    p.get_str("ok", ok, sizeof ok);
    if (std::string(ok) == "1") SubTLevelsResumed();
  }
  up_->in_phase = true;
  up_->phase_started = MonotonicSeconds();
  up_->images.clear();
  up_->waiting = up_->parts;
  if (!up_->restart && up_->phase == "durable") {  // early reporters are not asked again
    for (uint64_t id : up_->early) up_->waiting.erase(id);
    up_->images = up_->early_images;
  }
  const std::vector<uint64_t> targets(up_->waiting.begin(), up_->waiting.end());
  for (uint64_t id : targets) SendRaw(conns_[id].get(), kPhase, 0, p.data(), p.size());
  SubFinishPhaseIfDone();
}

void Server::SubOnPhaseDone(Conn* c, const Payload& p) {
  char name[32] = "";
  p.get_str("name", name, sizeof name);
  uint64_t early = 0;
  if (p.get_u64("early", &early) && early == 1) {  // an exiting process's image (Server::EarlyDurable)
    const bool after_write = up_->phase == "resume" || up_->phase == "durable";
    if (up_->restart || !o_.fork || std::string(name) != "durable" || !after_write || up_->parts.count(c->id) == 0 ||
        up_->early.count(c->id) != 0 || c->Self() == nullptr) {
      Log(1, "%s: ignoring an early PHASE_DONE %s", c->Describe().c_str(), name);
      return;
    }
    std::string why;
    if (!PhaseDoneOk(p, c->Describe(), "durable", &why)) {
      if (!up_->failed) up_->error = why;
      up_->retryable = false;
      up_->failed = true;
    } else {
      char image[4096] = "";
      uint64_t bytes = 0;
      p.get_str("image", image, sizeof image);
      p.get_u64("bytes", &bytes);
      Upstream::Image im{c->Self()->upid, image, bytes};
      up_->early_images.push_back(im);
      if (up_->in_phase && up_->phase == "durable") up_->images.push_back(im);
    }
    up_->early.insert(c->id);
    if (up_->in_phase && up_->phase == "durable" && up_->waiting.erase(c->id) > 0) SubFinishPhaseIfDone();
    return;
  }
  if (!up_->in_phase || up_->phase != name || up_->waiting.count(c->id) == 0) {
    Log(1, "%s: ignoring PHASE_DONE %s", c->Describe().c_str(), name);
    return;
  }
  std::string why;
  if (!PhaseDoneOk(p, c->Describe(), up_->phase, &why)) {
    if (!up_->failed) up_->error = why;
    if (!up_->failed) up_->retryable = !up_->restart && PhaseDoneRetryable(p);
    if (PhaseDoneSilent(p)) silent_ = true;  // a sub-coordinator below us timed a process out
    up_->failed = true;
  } else if (up_->phase == ImagePhase() && c->Self() != nullptr) {
    char image[4096] = "";
    uint64_t bytes = 0;
    p.get_str("image", image, sizeof image);
    p.get_u64("bytes", &bytes);
    up_->images.push_back({c->Self()->upid, image, bytes});
  }
  if (Member* m = c->Self()) m->state = up_->phase;
  up_->waiting.erase(c->id);
  SubFinishPhaseIfDone();
}

void Server::SubFinishPhaseIfDone() {
  if (!up_->in_phase || !up_->waiting.empty()) return;
  up_->in_phase = false;
  const bool levels = !up_->restart && up_->phase == ImagePhase() && (up_->tl.levels & kTL1);
  if (levels) return SubTLevelsExchange();  // checksums, copies, parity durable before we answer (then it does)
  SubAnswerPhase(levels);
}

// Sub: PHASE_DONE of the phase just finished here, with the images and, with levels, their checksums.
void Server::SubAnswerPhase(bool levels) {
  std::string frame(kHeaderSize + kMaxPayload, '\0');
  FrameBuilder b((uint8_t*)frame.data(), frame.size(), kPhaseDone, 0);
  b.add("name", up_->phase.c_str()).add("ok", up_->failed ? "0" : "1");
  if (up_->failed) b.add("error", up_->error.substr(0, 2000).c_str());
  if (up_->failed && up_->retryable) b.add("retry", "1");
  if (up_->failed && silent_) b.add("silent", "1");
  if (up_->phase == ImagePhase()) {
    b.add_u64("n", up_->images.size());
    for (size_t i = 0; i < up_->images.size(); i++) {
      std::string pre = "p." + std::to_string(i) + ".";
      b.add_u64((pre + "upid").c_str(), up_->images[i].upid).add((pre + "image").c_str(), up_->images[i].image.c_str())
          .add_u64((pre + "bytes").c_str(), up_->images[i].bytes);
      if (levels) b.add((pre + "xxh3").c_str(), Hex64(up_->tl.xxh[up_->images[i].image]).c_str());
    }
  }
  // The barrier's last phase (a forked checkpoint's durable comes after its resume).
  if (up_->phase == (up_->restart ? "resume" : o_.fork ? "durable" : "resume")) {
    for (uint64_t id : up_->parts) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      for (auto& [u, m] : it->second->members) {
        if (m.awaiting_restart) m.state = "running";
        m.awaiting_restart = false;
      }
    }
    up_->parts.clear();
  }
  size_t n = b.finish();
  if (n == 0) {
    Log(0, "sub: PHASE_DONE too large: %s", wire_err_str(b.error()));
    return;
  }
  SendUp(kPhaseDone, 0, frame.data() + kHeaderSize, n - kHeaderSize);
}

}  // namespace revive::coord
