// Coordinator event loop: connections, authentication, frame dispatch, pub/sub, status and kill.
// The checkpoint/restart barriers are in server_barrier.cpp.
#include "coord/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coord/log.h"
#include "coord/secret.h"
#include "coord/server_conn.h"
#include "coord/sha256.h"
#include "core/env.h"

namespace revive::coord {

// How long a coordinator whose restart failed stays for processes still being restored (a large image
// takes seconds to read).
constexpr double kRestartFailedGrace = 30;
namespace {

constexpr size_t kPreAuthMaxPayload = 4096;   // before HELLO nobody gets to make us buffer 1 MiB
constexpr size_t kMaxQueuedOut = 64u << 20;   // a peer that stops reading is dropped

}  // namespace

Member MemberFromHello(const Payload& p) {
  Member m;
  const char* v;
  size_t n;
  if (p.get("host", &v, &n)) m.host.assign(v, n);
  if (p.get("prog", &v, &n)) m.prog.assign(v, n);
  if (p.get("mpi_rank", &v, &n) && n > 0 && n < 16) m.mpi_rank.assign(v, n);
  p.get_u64("pid", &m.pid);
  uint64_t restart = 0;
  m.awaiting_restart = p.get_u64("restart", &restart) && restart == 1;
  return m;
}

bool PhaseDoneOk(const Payload& p, const std::string& who, const std::string& phase, std::string* why) {
  uint64_t ok = 0;
  if (p.get_u64("ok", &ok) && ok == 1) return true;
  char err[512] = "no reason given";
  p.get_str("error", err, sizeof err);
  *why = who + " failed phase " + phase + ": " + err;
  return false;
}

bool PhaseDoneRetryable(const Payload& p) {
  uint64_t r = 0;
  return p.get_u64("retry", &r) && r == 1;
}

bool PhaseDoneSilent(const Payload& p) {
  uint64_t r = 0;
  return p.get_u64("silent", &r) && r == 1;
}

double MonotonicSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double WallSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

Server::Server(ServerOptions o) : o_(std::move(o)) {}

Server::~Server() {
  for (auto& [t, done] : tl_background_) t.join();
  for (auto& [id, c] : conns_)
    if (c->fd >= 0) close(c->fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status Server::Start() {
  if (o_.ckpt_dir.empty() || o_.ckpt_dir[0] != '/')
    return Status::InvalidArgument("checkpoint directory must be an absolute path: \"" + o_.ckpt_dir + "\"");
  Env* env = Env::Default();
  Status s = CreateDirs(env, o_.ckpt_dir);
  if (!s.ok()) return s;
  if (o_.secret_file.empty()) o_.secret_file = SecretPath(o_.ckpt_dir);
  s = LoadOrCreateSecret(o_.secret_file, &secret_);
  if (!s.ok()) return s;

  // Number new generations above anything on disk; keep upids unique across restarts.
  uint64_t newest = 0;
  if (FindNewestGeneration(env, o_.ckpt_dir, &newest, &max_gen_seen_).ok()) {
    generation_ = newest;
    Manifest m;
    if (ReadManifest(env, GenerationDir(o_.ckpt_dir, newest) + "/MANIFEST.json", &m).ok())
      for (const auto& p : m.procs) next_upid_ = std::max(next_upid_, p.upid + 1);
  }

  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons(o_.port);
  if (inet_pton(AF_INET, o_.bind.c_str(), &addr.sin_addr) != 1)
    return Status::InvalidArgument("--bind " + o_.bind + ": not an IPv4 address");
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::FromErrno("socket", errno);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listen_fd_, (struct sockaddr*)&addr, sizeof addr) != 0)
    return Status::FromErrno("bind " + o_.bind + ":" + std::to_string(o_.port), errno);
  if (listen(listen_fd_, 4096) != 0) return Status::FromErrno("listen", errno);
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, (struct sockaddr*)&addr, &len);
  port_ = ntohs(addr.sin_port);

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::FromErrno("epoll/eventfd", errno);
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // 0 = listener
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = UINT64_MAX;  // wake-up
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  if (o_.parent.empty()) {
    s = LoadTLevelsConfig(&tl_);
    if (!s.ok()) return s;
  }
  if (!o_.parent.empty()) {
    o_.interval = 0;  // the root decides when to checkpoint
    s = ConnectUpstream();
    if (!s.ok()) return s;
    SubTLevelsListen();
    ev.data.u64 = kUpstreamId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, up_->client.fd(), &ev);
    up_->ex.done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (up_->ex.done_fd < 0) return Status::FromErrno("eventfd", errno);
    ev.data.u64 = kExchangeDoneId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, up_->ex.done_fd, &ev);
  }
  started_at_ = MonotonicSeconds();
  next_interval_ = started_at_ + o_.interval;
  Log(2, "listening on %s:%u, checkpoint dir %s", o_.bind.c_str(), port_, o_.ckpt_dir.c_str());
  return Status::OK();
}

void Server::Stop() {
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
}

Status Server::Run() {
  struct epoll_event evs[256];
  while (!stopping_) {
    int n = epoll_wait(epoll_fd_, evs, 256, NextTimeoutMs());
    if (n < 0 && errno != EINTR) return Status::FromErrno("epoll_wait", errno);
    for (int i = 0; i < n; i++) {
      uint64_t id = evs[i].data.u64;
      if (id == 0) {
        Accept();
        continue;
      }
      if (id == UINT64_MAX) {
        stopping_ = true;
        continue;
      }
      if (id == kUpstreamId) {
        OnUpstreamReadable();
        continue;
      }
      if (id == kExchangeDoneId) {
        if (up_ != nullptr) SubTLevelsExchangeDone();
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second->dead) continue;
      Conn* c = it->second.get();
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) OnReadable(c);
      if (!c->dead && (evs[i].events & EPOLLOUT)) OnWritable(c);
    }
    CheckTimers();
    Reap();
    // A restart whose processes all left before the barrier completed (restart --hosts stops the others
    // when one host's part failed) has nothing left to wait for either.
    if (o_.exit_on_last && (state_ == State::kIdle || state_ == State::kRestartWait)) {
      // After a failed restart, the processes still being restored come later: wait for them (they are
      // told to exit) for a while.
      // And the failed restart's `revive restart` asks why once its roots are gone: stay for that question
      // too (within the grace), so it can say it where the user looks.
      bool latecomers = FailedRestartOpen() || (!restart_failed_.empty() && !failure_told_ &&
                                                MonotonicSeconds() - restart_failed_at_ < kRestartFailedGrace);
      // A sub whose exchange thread still runs owes the root its image phase (with --fork the programs may
      // all have ended meanwhile): it leaves once that is answered.
      const bool exchanging = up_ != nullptr && up_->ex.thread.joinable();
      // A process dropped because it did not answer (stopped, hung) may still run: not the last one left.
      if (ever_had_proc_ && ProcCount() == 0 && !latecomers && !LostLiveStillRuns() && !exchanging) {
        Log(2, "last process left; exiting (--exit-on-last)");
        break;
      }
      if (!ever_had_proc_ && MonotonicSeconds() - started_at_ > o_.idle_exit) {
        Log(0, "no process connected within %.0f s; exiting (--exit-on-last)", o_.idle_exit);
        break;
      }
    }
  }
  return Status::OK();
}

void Server::Accept() {
  for (;;) {
    struct sockaddr_in peer;
    socklen_t peer_len = sizeof peer;
    int fd = accept4(listen_fd_, (struct sockaddr*)&peer, &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN) Log(0, "accept: %s", strerror(errno));  // EMFILE: the listener stays armed
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->id = ++next_conn_id_;
    c->fd = fd;
    c->since = MonotonicSeconds();
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    c->addr = std::string(ip) + ":" + std::to_string(ntohs(peer.sin_port));
    if (getrandom(c->nonce, sizeof c->nonce, 0) != (ssize_t)sizeof c->nonce) {
      Log(0, "getrandom: %s", strerror(errno));
      close(fd);
      return;
    }
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    Conn* raw = c.get();
    conns_[c->id] = std::move(c);
    uint8_t buf[256];
    FrameBuilder b(buf, sizeof buf, kChallenge, 0);
    b.add_hex("nonce", raw->nonce, sizeof raw->nonce);
    Send(raw, b);
  }
}

void Server::OnReadable(Conn* c) {
  char buf[65536];
  bool eof = false;
  for (;;) {
    ssize_t r = read(c->fd, buf, sizeof buf);
    if (r > 0) {
      if (c->in.empty()) c->since = MonotonicSeconds();
      c->in.append(buf, (size_t)r);
      if ((size_t)r < sizeof buf) break;
      continue;
    }
    if (r == 0) eof = true;
    else if (errno == EINTR) continue;
    else if (errno != EAGAIN) eof = true;
    break;
  }
  size_t off = 0;
  while (!c->dead && c->in.size() - off >= kHeaderSize) {
    FrameHeader h;
    WireErr e = decode_header((const uint8_t*)c->in.data() + off, &h);
    if (e == WireErr::kOk && c->role == Conn::Role::kUnauth && h.length > kPreAuthMaxPayload) {
      SendError(c, h.seq, "protocol error: frame larger than 4 KiB before authentication");
      Drop(c, "protocol error: frame larger than 4 KiB before authentication");
      return;
    }
    if (e != WireErr::kOk) {
      SendError(c, 0, std::string("protocol error: ") + wire_err_str(e));
      Drop(c, std::string("protocol error: ") + wire_err_str(e));
      return;
    }
    if (c->in.size() - off - kHeaderSize < h.length) break;  // wait for the rest
    Payload p;
    e = p.parse(c->in.data() + off + kHeaderSize, h.length);
    const char* missing = "";
    if (e == WireErr::kOk) e = check_required(h.type, p, &missing);
    if (e != WireErr::kOk) {
      std::string why = std::string("protocol error in ") + msg_type_name(h.type) + ": " + wire_err_str(e);
      if (*missing) why += std::string(" \"") + missing + "\"";
      SendError(c, h.seq, why);
      Drop(c, why);
      return;
    }
    HandleFrame(c, h, p);
    off += kHeaderSize + h.length;
  }
  if (c->dead) return;
  c->in.erase(0, off);
  if (off > 0 && !c->in.empty()) c->since = MonotonicSeconds();
  if (eof) Drop(c, c->in.empty() ? "disconnected" : "disconnected in the middle of a frame");
}

void Server::OnWritable(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t w = send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
    if (w > 0) {
      c->out_off += (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) {
      break;
    } else {
      Drop(c, std::string("send: ") + strerror(errno));
      return;
    }
  }
  if (c->out_off == c->out.size()) {
    c->out.clear();
    c->out_off = 0;
  } else if (c->out_off > (1u << 20)) {
    c->out.erase(0, c->out_off);
    c->out_off = 0;
  }
  UpdateInterest(c);
}

void Server::UpdateInterest(Conn* c) {
  bool want = c->out_off < c->out.size();
  if (want == c->want_out) return;
  struct epoll_event ev = {};
  ev.events = EPOLLIN | (want ? (uint32_t)EPOLLOUT : 0u);
  ev.data.u64 = c->id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_out = want;
}

void Server::Send(Conn* c, FrameBuilder& b) {
  if (c->dead) return;
  size_t n = b.finish();
  if (n == 0) {  // our own bug or an oversized reply (e.g. STATUS of a huge computation)
    Log(0, "cannot build reply: %s", wire_err_str(b.error()));
    return;
  }
  if (c->out.size() - c->out_off + n > kMaxQueuedOut) {
    Drop(c, "not reading its replies");
    return;
  }
  c->out.append((const char*)b.data(), n);
  OnWritable(c);
}

void Server::SendError(Conn* c, uint32_t seq, const std::string& reason) {
  uint8_t buf[1024];
  FrameBuilder b(buf, sizeof buf, kError, seq);
  std::string r = reason.substr(0, 900);
  b.add("reason", r.c_str());
  Send(c, b);
}

void Server::Drop(Conn* c, const std::string& why) {
  if (c->dead) return;
  bool routine = c->said_bye || (c->role == Conn::Role::kCli && why == "disconnected");
  Log(routine ? 2 : 1, "dropping %s (%s): %s", c->Describe().c_str(),
      c->addr.c_str(), why.c_str());
  // Best effort: flush what is queued (an ERROR explaining why) before closing.
  if (c->out_off < c->out.size())
    (void)!send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
  c->dead = true;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  c->fd = -1;
  c->drop_reason = why;
  // The barrier hears about it in Reap(), not here: Drop() can be reached from inside a Send() made while
  // iterating participants, which must not change under the loop.
  dead_.push_back(c->id);
}

void Server::Reap() {
  while (!dead_.empty()) {  // reacting to one loss may lose more peers (sends to them fail)
    std::vector<uint64_t> batch;
    batch.swap(dead_);
    for (uint64_t id : batch) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      Conn* c = it->second.get();
      std::string why = c->said_bye ? "exited" : c->drop_reason;
      if (!o_.parent.empty()) {
        if (c->role == Conn::Role::kProc) SubPeerGone(c, why);
      } else if (c->role == Conn::Role::kProc || c->role == Conn::Role::kSub) {
        OnPeerGone(c, why);
        for (const auto& [upid, m] : c->members) NoteGone(upid);
      }
    }
    for (uint64_t id : batch) conns_.erase(id);
  }
}

size_t Server::ProcCount() const {
  size_t n = 0;
  for (const auto& [id, c] : conns_)
    if (!c->dead && (c->role == Conn::Role::kProc || c->role == Conn::Role::kSub))
      n += c->members.size() - c->members.count(0);  // 0: a HELLO on its way to the root (sub)
  return n;
}

void Server::HandleFrame(Conn* c, const FrameHeader& h, const Payload& p) {
  if (c->role == Conn::Role::kUnauth) {
    if (h.type != kHello) {
      SendError(c, h.seq, std::string("expected HELLO, got ") + msg_type_name(h.type));
      Drop(c, "message before HELLO");
      return;
    }
    HandleHello(c, h, p);
    return;
  }
  if (!o_.parent.empty()) {  // we are a sub-coordinator: server_sub.cpp
    SubHandleFrame(c, h, p);
    return;
  }
  bool has_members = c->role == Conn::Role::kProc || c->role == Conn::Role::kSub;
  switch (h.type) {
    case kHello:
      if (c->role == Conn::Role::kSub) {  // a process behind the sub (the sub checked its proof)
        RegisterMember(c, h, p);
        return;
      }
      break;
    case kCkptRequest: RequestCheckpoint(c, h.seq); return;
    case kStatusRequest: SendStatus(c, h.seq); return;
    case kPublish: HandlePublish(p); return;
    case kLookup: HandleLookup(c, h, p); return;
    case kPhaseDone:
      if (has_members) {
        OnPhaseDone(c, p);
        return;
      }
      break;
    case kBye: {
      int64_t st = 0;
      p.get_i64("status", &st);
      uint64_t upid = 0;
      if (c->role == Conn::Role::kSub && p.get_u64("upid", &upid)) {
        char lost[256] = "";
        if (p.get_str("lost", lost, sizeof lost) && lost[0]) {  // its sub timed it out: alive, not ours
          auto it = c->members.find(upid);
          if (it != c->members.end()) NoteLostLive(it->second, lost);
          RemoveMember(c, upid, std::string("dropped after it ") + lost);
          return;
        }
        uint64_t died = 0;  // its sub saw it end without exit()
        if (p.get_u64("died", &died) && died == 1) {
          auto it = c->members.find(upid);
          if (it != c->members.end() && !it->second.mpi_rank.empty() &&
              !RankHeldByOther(it->second.mpi_rank, c, upid))
            NoteDeadRank(it->second);
          RemoveMember(c, upid, "ended without exit() (killed or crashed)");
          return;
        }
        RemoveMember(c, upid, st == 0 ? std::string("exited") : "exited with status " + std::to_string(st));
        return;
      }
      if (c->role == Conn::Role::kProc) {
        // An exit() in progress, not the end: the process stays a member until its connection closes
        // (the kernel's exit). It still answers checkpoints meanwhile, and it must: its parent has not
        // waited for it, so a generation without it would restore a parent whose wait fails with ECHILD
        // (files.make: gcc's child, stopped in exit() on a full pipe). BYE only marks the later loss
        // as an exit rather than a kill (Dead MPI ranks, docs/protocol.md).
        c->said_bye = true;
        Log(2, "%s said BYE", c->Describe().c_str());
        return;
      }
      break;
    }
    case kKill:
      if (c->role == Conn::Role::kCli || c->role == Conn::Role::kSub) {
        // A restored process that could not be restored says why (report_restore_failure): the others
        // of the restart are parked waiting for it, so the whole restart ends.
        const char* why;
        size_t wn;
        uint64_t upid = 0;
        // `revive restart` saw a restorer it waits for end badly (TellEnded): failing the restart only
        // while that process has not come back (else its exit is its own business).
        const char* gone;
        size_t gn;
        if (p.get("gone", &gone, &gn) && gn == 1 && gone[0] == '1' && p.get("why", &why, &wn) &&
            p.get_u64("upid", &upid) && !RestorerEnded(upid, why, wn)) {
          uint8_t buf[64];
          FrameBuilder k(buf, sizeof buf, kKill, h.seq);
          k.add_u64("procs", 0);
          Send(c, k);
          return;
        }
        if (p.get("why", &why, &wn)) {
          p.get_u64("upid", &upid);
          Log(0, "restart failed: process upid %llu: %.*s; ending every process of the restart",
              (unsigned long long)upid, int(wn), why);
          ever_had_proc_ = true;  // --exit-on-last: leave once the others are gone, even if none came
          NoteRestartFailed(upid, why, wn);
        }
        KillAll(c, h.seq);
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

void Server::HandleHello(Conn* c, const FrameHeader& h, const Payload& p) {
  uint8_t want[kSha256Size], got[kSha256Size];
  hmac_sha256(secret_.data(), secret_.size(), c->nonce, sizeof c->nonce, want);
  if (!p.get_hex("proof", got, sizeof got) || !equal_constant_time(want, got, sizeof want)) {
    SendError(c, h.seq, "authentication failed");
    Drop(c, "authentication failed");
    return;
  }
  char role[16] = "";
  p.get_str("role", role, sizeof role);
  std::string r = role;
  const char* v;
  size_t n;
  if (p.get("host", &v, &n)) c->host.assign(v, n);
  if (r == "sub" && !o_.parent.empty()) {
    SendError(c, h.seq, "role=sub: this is itself a sub-coordinator; connect to the root");
    Drop(c, "role=sub refused");
    return;
  }
  if (r == "sub") {
    c->role = Conn::Role::kSub;
    SendWelcome(c, h.seq, 0);
    Log(2, "sub-coordinator on %s connected", c->host.c_str());
    return;
  }
  if (r == "cli") {
    c->role = Conn::Role::kCli;
    SendWelcome(c, h.seq, 0);
    return;
  }
  if (r != "proc") {
    SendError(c, h.seq, "HELLO: unknown role \"" + r + "\" (proc, cli or sub)");
    Drop(c, "bad role");
    return;
  }
  c->role = Conn::Role::kProc;
  if (!o_.parent.empty()) {  // sub-coordinator: the root assigns the upid (server_sub.cpp)
    SubForwardHello(c, h, p);
    return;
  }
  RegisterMember(c, h, p);
}

void Server::SendWelcome(Conn* c, uint32_t seq, uint64_t upid, bool outside) {
  uint8_t buf[4096 + 512];
  FrameBuilder b(buf, sizeof buf, kWelcome, seq);
  b.add_u64("upid", upid).add("ckpt_dir", o_.ckpt_dir.c_str()).add_u64("generation", generation_)
      .add_u64("compress", o_.compress).add_u64("fork", o_.fork).add_u64("interval", (uint64_t)o_.interval)
      .add_u64("outside", outside).add_u64("phase_timeout", (uint64_t)o_.phase_timeout);
  Send(c, b);
}

// A process, connected directly (owner = its own connection) or behind a sub-coordinator (owner = the
// sub, which relays our WELCOME by seq).
void Server::RegisterMember(Conn* owner, const FrameHeader& h, const Payload& p) {
  Member m = MemberFromHello(p);
  bool restart = m.awaiting_restart;
  if (restart) {
    if (!p.get_u64("upid", &m.upid) || m.upid == 0) {
      SendError(owner, h.seq, "HELLO restart=1 needs the process's upid");
      if (owner->role == Conn::Role::kProc) Drop(owner, "restart without upid");
      return;
    }
    for (const auto& [id, c] : conns_) {
      if (!c->dead && c->members.count(m.upid) != 0) {
        SendError(owner, h.seq, "HELLO restart=1 upid=" + std::to_string(m.upid) + ": that upid is connected already");
        if (owner->role == Conn::Role::kProc) Drop(owner, "duplicate upid");
        return;
      }
    }
    next_upid_ = std::max(next_upid_, m.upid + 1);
    m.state = "restored";
  } else {
    m.upid = next_upid_++;
  }
  owner->members[m.upid] = m;
  kv_.erase("gone." + std::to_string(m.upid));  // restored again under this coordinator (NoteGone)
  // A coordinator started for a restart (--restart-manifest) that none of the restart's processes reached
  // yet: a new process is a straggler of the killed run (a fork child the kill missed, exec'ing its next
  // program, which retries the port until this coordinator is up). It must not make the restart's
  // coordinator "had processes": when it ends, --exit-on-last would leave before the restored processes
  // come, and they would find nobody (cli.outside_file hung so, 1 run in 15).
  const bool straggler = !restart && !o_.restart_manifest.empty() && state_ == State::kIdle && !ever_had_proc_;
  if (straggler)
    Log(0, "%s connected before any process of the restart: a leftover of the run that was killed; "
        "it does not keep this coordinator", m.Describe().c_str());
  else
    ever_had_proc_ = true;
  // A new process (a fork child) while a checkpoint is being taken: during suspend it joins the barrier
  // (its parent is being suspended in the fork wrapper; the child is then in the generation too).
  // Later, or behind a sub-coordinator, it is outside this generation, and WELCOME says so: its parent's
  // save refuses, and the generation is taken again with the child.
  bool outside = false, join = false;
  if (!restart && state_ == State::kCheckpoint) {
    join = owner->role == Conn::Role::kProc && phase_ == "suspend";
    outside = !join;
  }
  SendWelcome(owner, h.seq, m.upid, outside);
  // Outside, before the processes resumed: it was made (a fork) or replaced (an exec) before the processes
  // were cut, so it belongs to this generation's moment. A fork child's parent refuses its save for it, but
  // an exec'd image whose parent is not in the computation (a `revive launch -n N -- bash -c 'exec prog'`
  // root) has nobody to do so: the generation went on without it (tlevels.crash, 2 of 3 processes in the
  // manifest, at load 9 behind sub-coordinators). Taken again, with it.
  if (outside && phase_ != "resume" && phase_ != "durable")
    FailGeneration(m.Describe() + " connected during phase " + phase_ + ", before the processes resumed", true);
  Log(2, "%s connected%s%s", m.Describe().c_str(), restart ? " (restart)" : "",
      join ? " (joins the checkpoint in progress)" : outside ? " (outside the checkpoint in progress)" : "");
  if (join) {
    participants_.insert(owner->id);
    waiting_.insert(owner->id);
    SendPhase(owner);
  }
  // A latecomer of the failed restart. Once none can come, a restored process is a new restart's (a
  // coordinator that stays: without --exit-on-last).
  if (m.awaiting_restart && FailedRestartOpen()) {
    failed_pending_.erase(m.upid);
    Log(1, "%s: the restart failed (%s); told to exit", m.Describe().c_str(), restart_failed_.c_str());
    uint8_t buf[64];
    FrameBuilder k(buf, sizeof buf, kKill, 0);
    Send(owner, k);
    return;
  }
  if (m.awaiting_restart && !restart_failed_.empty()) restart_failed_.clear();  // a new restart: not that one's
  if (m.awaiting_restart) OnRestartHello(m.upid);
}

void Server::NoteRestartFailed(uint64_t upid, const char* why, size_t n) {
  if (restart_failed_.empty()) {
    restart_failed_at_ = MonotonicSeconds();
    // Who may still come: the processes the restart waits for, or (the first one failed before any came
    // back) every process of its manifest that lists the failed one; one image restored alone: nobody.
    failed_pending_.clear();
    if (state_ == State::kRestartWait) {
      failed_pending_ = restart_expected_;
    } else if (state_ == State::kIdle) {
      Manifest m;
      bool listed = false;
      if (LoadRestartManifest(&m).ok())
        for (const auto& p : m.procs) listed |= p.upid == upid;
      if (listed)
        for (const auto& p : m.procs) failed_pending_.insert(p.upid);
    }
    for (const auto& [id, pc] : conns_)
      for (const auto& [u, mem] : pc->members) failed_pending_.erase(u);
    failed_pending_.erase(upid);
  }
  restart_failed_.assign(why, n);
  failure_told_ = false;
}

bool Server::RestorerEnded(uint64_t upid, const char* why, size_t n) {
  if (!restart_failed_.empty()) {
    // A latecomer of the failed restart that will never come: one less to stay for.
    if (failed_pending_.erase(upid))
      Log(1, "process upid %llu of the failed restart will not come: %.*s", (unsigned long long)upid, int(n), why);
    return false;
  }
  bool awaited = false;
  if (state_ == State::kRestartWait) {
    awaited = restart_expected_.count(upid) != 0;
  } else if (state_ == State::kIdle && !ever_had_proc_) {
    // None came yet: a process of the restart manifest is awaited.
    Manifest m;
    if (LoadRestartManifest(&m).ok())
      for (const auto& pr : m.procs) awaited |= pr.upid == upid;
  }
  for (const auto& [id, pc] : conns_)
    if (pc->members.count(upid)) awaited = false;  // here (or its exit not seen yet): it came back
  return awaited;
}

bool Server::FailedRestartOpen() const {
  return !restart_failed_.empty() && !failed_pending_.empty() &&
         MonotonicSeconds() - restart_failed_at_ < kRestartFailedGrace;
}

void Server::RemoveMember(Conn* sub, uint64_t upid, const std::string& why) {
  auto it = sub->members.find(upid);
  if (it == sub->members.end()) return;
  Log(2, "%s (behind %s) %s", it->second.Describe().c_str(), sub->Describe().c_str(), why.c_str());
  if (it->second.awaiting_restart && state_ == State::kRestartWait) restart_expected_.insert(upid);
  // --fork: it may have left after its sub got its image early; the sub's durable answer names it.
  if (state_ == State::kCheckpoint) departed_[upid] = std::make_unique<Member>(it->second);
  sub->members.erase(it);
  NoteGone(upid);
}

}  // namespace revive::coord
