// The coordinator's small services: publish/subscribe (DMTCP's peer discovery), STATUS and KILL.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "coord/log.h"
#include "coord/server.h"
#include "coord/server_conn.h"

namespace revive::coord {

void Server::KillAll(Conn* requester, uint32_t seq) {
  uint8_t buf[64];
  size_t told = 0;
  for (auto& [id, pc] : conns_) {
    if (pc->dead || (pc->role != Conn::Role::kProc && pc->role != Conn::Role::kSub)) continue;
    FrameBuilder b(buf, sizeof buf, kKill, 0);
    Send(pc.get(), b);
    told += pc->members.size();
  }
  Log(1, "kill: told %zu processes to exit", told);
  FrameBuilder b(buf, sizeof buf, kKill, seq);
  b.add_u64("procs", told);
  Send(requester, b);
}

void Server::HandlePublish(const Payload& p) {
  const char *k, *v;
  size_t kn, vn;
  p.get("key", &k, &kn);
  p.get("value", &v, &vn);
  Publish(std::string(k, kn), std::string(v, vn));
}

void Server::NoteGone(uint64_t upid) {
  if (upid != 0) Publish("gone." + std::to_string(upid), "1");
}

void Server::Publish(const std::string& key, const std::string& value) {
  kv_[key] = value;
  auto range = lookup_waiters_.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) {
    auto c = conns_.find(it->second.first);
    if (c == conns_.end() || c->second->dead) continue;
    std::string frame(kHeaderSize + key.size() + value.size() + 32, '\0');
    FrameBuilder b((uint8_t*)frame.data(), frame.size(), kValue, it->second.second);
    b.add("key", key.c_str(), key.size()).add("value", value.c_str(), value.size()).add("found", "1");
    Send(c->second.get(), b);
  }
  lookup_waiters_.erase(range.first, range.second);
}

void Server::AbortLookups(const std::set<uint64_t>& conn_ids) {
  for (auto it = lookup_waiters_.begin(); it != lookup_waiters_.end();) {
    if (conn_ids.count(it->second.first) == 0) {
      ++it;
      continue;
    }
    auto c = conns_.find(it->second.first);
    if (c != conns_.end() && !c->second->dead) {
      const std::string& key = it->first;
      std::string frame(kHeaderSize + key.size() + 64, '\0');
      FrameBuilder b((uint8_t*)frame.data(), frame.size(), kValue, it->second.second);
      b.add("key", key.c_str(), key.size()).add("value", "").add("found", "0");
      Send(c->second.get(), b);
    }
    it = lookup_waiters_.erase(it);
  }
}

// m's process as /proc/<pid>/stat shows it, if m runs on this host (false: elsewhere, not ours to look
// at). h->exists is false when it is gone (and reaped).
bool Server::ReadHere(const Member& m, HereState* h) const {
  char host[256] = "";
  if (m.pid == 0 || gethostname(host, sizeof host - 1) != 0 || m.host != host) return false;
  *h = HereState{};
  std::string stat;
  std::ifstream f("/proc/" + std::to_string(m.pid) + "/stat");
  if (!f || !std::getline(f, stat)) return true;
  size_t lp = stat.find('('), rp = stat.rfind(')');
  if (lp == std::string::npos || rp == std::string::npos || rp + 2 >= stat.size()) return true;
  h->exists = true;
  h->comm = stat.substr(lp + 1, rp - lp - 1);
  std::istringstream in(stat.substr(rp + 2));
  long ppid, pgrp, session, tty, tpgid;
  in >> h->state >> ppid >> pgrp >> session >> tty >> tpgid >> h->flags;
  return true;
}

// Another connection stands for c's process now: its exec'd image (same pid, same host). One welcomed
// outside a checkpoint before the processes resumed has failed that attempt already (RegisterMember).
bool Server::ExecdImageConnected(const Conn& c, const Member& m) const {
  for (const auto& [id, other] : conns_)
    if (!other->dead && other.get() != &c)
      for (const auto& [u, om] : other->members)
        if (u != 0 && om.pid == m.pid && om.host == m.host) return true;
  return false;
}

bool Server::LostLiveStillRuns() const {
  for (const Member& m : lost_live_procs_) {
    HereState h;
    // Alive, and not another program that took its pid since (the name differs).
    if (ReadHere(m, &h) && h.exists && h.state != 'Z' && h.state != 'X' && m.prog.compare(0, h.comm.size(), h.comm) == 0)
      return true;
  }
  return false;
}

bool Server::RankHeldByOther(const std::string& rank, const Conn* conn, uint64_t upid) const {
  for (const auto& [id, other] : conns_)
    if (!other->dead)
      for (const auto& [u, om] : other->members)
        if (u != 0 && om.mpi_rank == rank && !(other.get() == conn && u == upid)) return true;
  return false;
}

bool Server::DeadRank(const Conn& c) const {
  const Member* m = const_cast<Conn&>(c).Self();
  return c.role == Conn::Role::kProc && m != nullptr && !m->mpi_rank.empty() && DiedWithoutExit(c) &&
         !RankHeldByOther(m->mpi_rank, &c, m->upid);
}

bool Server::DiedWithoutExit(const Conn& c) const {
  if (c.said_bye || c.timed_out) return false;
  const Member* m = const_cast<Conn&>(c).Self();
  if (m == nullptr || m->pid == 0 || ExecdImageConnected(c, *m)) return false;
  return LeftOnItsOwn(c);  // gone, a zombie or exiting: it ended, and without a BYE
}

// Whether a process that disconnected left on its own (it exited, is exiting, or its exec'd image
// took over under a new connection), as opposed to a process that still runs without its connection.
// Only a process of this host can be looked at; one elsewhere counts as still running.
bool Server::LeftOnItsOwn(const Conn& c) const {
  const Member* m = const_cast<Conn&>(c).Self();
  if (m == nullptr || m->pid == 0) return false;
  if (ExecdImageConnected(c, *m)) return true;
  HereState h;
  if (!ReadHere(*m, &h)) return false;
  constexpr unsigned long kPfExiting = 0x4;  // PF_EXITING: in exit, files (our socket) already closed
  return !h.exists || h.state == 'Z' || h.state == 'X' || (h.flags & kPfExiting) != 0;
}

void Server::HandleLookup(Conn* c, const FrameHeader& h, const Payload& p) {
  const char* k;
  size_t kn;
  p.get("key", &k, &kn);
  std::string key(k, kn);
  uint64_t wait = 0, count = 0;
  p.get_u64("wait", &wait);
  if (p.get_u64("count", &count) && count == 1) {
    // How many keys start with `key` (a plugin counting the processes that share a pipe), never waits.
    uint64_t n = 0;
    for (auto it = kv_.lower_bound(key); it != kv_.end() && it->first.compare(0, key.size(), key) == 0; ++it) ++n;
    std::string frame(kHeaderSize + key.size() + 64, '\0');
    FrameBuilder b((uint8_t*)frame.data(), frame.size(), kValue, h.seq);
    b.add("key", key.c_str(), key.size()).add_u64("value", n).add("found", "1");
    Send(c, b);
    return;
  }
  uint64_t next = 0;
  if (p.get_u64("next", &next) && next == 1) {
    // The least key after `key` that starts with `prefix`, never waits: a plugin walking the keys its
    // peers published under one prefix (the fd plugin finding who else holds a file description).
    const char* pre;
    size_t pn = 0;
    if (!p.get("prefix", &pre, &pn)) pre = "";
    auto n = kv_.upper_bound(key);
    const bool found = n != kv_.end() && n->first.compare(0, pn, pre, pn) == 0;
    const std::string nk = found ? n->first : std::string(), nv = found ? n->second : std::string();
    std::string frame(kHeaderSize + nk.size() + nv.size() + 32, '\0');
    FrameBuilder b((uint8_t*)frame.data(), frame.size(), kValue, h.seq);
    b.add("key", nk.c_str(), nk.size()).add("value", nv.c_str(), nv.size()).add("found", found ? "1" : "0");
    Send(c, b);
    return;
  }
  auto it = kv_.find(key);
  if (it == kv_.end() && wait == 1) {
    lookup_waiters_.emplace(key, std::make_pair(c->id, h.seq));
    return;
  }
  const std::string value = it == kv_.end() ? "" : it->second;
  std::string frame(kHeaderSize + key.size() + value.size() + 32, '\0');
  FrameBuilder b((uint8_t*)frame.data(), frame.size(), kValue, h.seq);
  b.add("key", key.c_str(), key.size()).add("value", value.c_str(), value.size())
      .add("found", it == kv_.end() ? "0" : "1");
  Send(c, b);
}

void Server::SendStatus(Conn* c, uint32_t seq) {
  std::string frame(kHeaderSize + kMaxPayload, '\0');
  FrameBuilder b((uint8_t*)frame.data(), frame.size(), kStatus, seq);
  b.add_u64("procs", ProcCount()).add_u64("generation", generation_).add("state", StateName().c_str());
  b.add("ckpt_dir", o_.ckpt_dir.c_str()).add_u64("coord_pid", (uint64_t)getpid());
  // Why a restart was ended: `revive restart` says it where the user looks (the process that could not
  // be restored wrote it to its own stderr, which may be a file of the computation).
  if (!restart_failed_.empty()) {
    b.add("restart_failed", restart_failed_.substr(0, 900).c_str());
    failure_told_ = true;
    // A retry waits while its processes would be taken for the failed restart's latecomers, or until
    // this coordinator leaves (restart_ends: it does once nobody of the failed restart is left).
    b.add("restart_failed_open", FailedRestartOpen() ? "1" : "0").add("restart_ends", o_.exit_on_last ? "1" : "0");
  }
  // The process list stops short of the 1 MiB frame limit (tens of thousands of processes): STATUS then
  // says truncated=1 rather than failing.
  size_t i = 0, bytes = 512 + o_.ckpt_dir.size();
  for (const auto& [id, pc] : conns_) {
    if (pc->dead) continue;
    for (const auto& [upid, m] : pc->members) {
      if (upid == 0) continue;  // sub-coordinator: a HELLO still on its way to the root
      bytes += 5 * 32 + 60 + m.host.size() + m.prog.size() + m.state.size();
      if (bytes > kMaxPayload) {
        b.add("truncated", "1");
        Send(c, b);
        return;
      }
      std::string pre = "p." + std::to_string(i++) + ".";
      b.add_u64((pre + "upid").c_str(), m.upid).add_u64((pre + "pid").c_str(), m.pid)
          .add((pre + "host").c_str(), m.host.c_str()).add((pre + "prog").c_str(), m.prog.c_str())
          .add((pre + "state").c_str(), m.state.c_str());
    }
  }
  Send(c, b);
}

}  // namespace revive::coord
