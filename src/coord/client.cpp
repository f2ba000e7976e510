#include "coord/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coord/sha256.h"

namespace revive::coord {
namespace {

// strerror() may translate (gettext, locks, malloc); strerrordesc_np is a plain table lookup, so safe on
// the checkpoint path.
const char* err_text(int e) {
  const char* s = strerrordesc_np(e);
  return s != nullptr ? s : "unknown error";
}

int64_t now_ms() {
  struct timespec ts;
  // The system call, not the vdso: revive-restart reports a failed restore after it has moved the vdso
  // away from under its own libc (report_restore_failure).
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Errors worth retrying: the coordinator is not listening yet, or the listen backlog is full
// (many processes starting at once).
bool transient_connect_error(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == EAGAIN || e == ECONNRESET || e == ENETUNREACH ||
         e == EHOSTUNREACH || e == EINTR;
}

bool parse_port(const char* s, uint16_t* out) {
  if (s == nullptr || *s == '\0') return false;
  unsigned long v = 0;
  for (const char* p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (unsigned long)(*p - '0');
    if (v > 65535) return false;
  }
  if (v == 0) return false;
  *out = (uint16_t)v;
  return true;
}

// Resolves host to an IPv4/IPv6 socket address. Numeric first (no allocation), names via getaddrinfo.
bool resolve(const char* host, uint16_t port, struct sockaddr_storage* ss, socklen_t* len) {
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in* in4 = (struct sockaddr_in*)ss;
  struct sockaddr_in6* in6 = (struct sockaddr_in6*)ss;
  if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    *len = sizeof *in4;
    return true;
  }
  if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    *len = sizeof *in6;
    return true;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &res) != 0 || res == nullptr) return false;
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  if (ss->ss_family == AF_INET) in4->sin_port = htons(port);
  else in6->sin6_port = htons(port);
  return true;
}

}  // namespace

void str_copy(char* out, size_t cap, const char* s) {
  if (cap == 0) return;
  out[0] = '\0';
  str_append(out, cap, s);
}

void str_append(char* out, size_t cap, const char* s) {
  if (cap == 0) return;
  size_t n = strnlen(out, cap - 1);
  while (*s && n + 1 < cap) out[n++] = *s++;
  out[n] = '\0';
}

void str_append_u64(char* out, size_t cap, uint64_t v) {
  char tmp[21];
  tmp[format_u64(v, tmp)] = '\0';
  str_append(out, cap, tmp);
}

bool client_options_from_env(ClientOptions* o, char* err, size_t err_len) {
  const char* host = getenv("REVIVE_COORD_HOST");
  if (host != nullptr && *host) o->host = host;
  const char* port = getenv("REVIVE_COORD_PORT");
  if (port == nullptr || *port == '\0') port = getenv("REVIVE_PORT");
  if (port != nullptr && *port && !parse_port(port, &o->port)) {
    str_copy(err, err_len, "REVIVE_COORD_PORT: not a port number (1..65535): ");
    str_append(err, err_len, port);
    return false;
  }
  const char* secret = getenv("REVIVE_SECRET_FILE");
  if (secret == nullptr || *secret == '\0') {
    str_copy(err, err_len, "REVIVE_SECRET_FILE is not set (run the program under `revive launch`)");
    return false;
  }
  o->secret_file = secret;
  return true;
}

long read_secret_file(const char* path, uint8_t* out, size_t cap, char* err, size_t err_len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    str_copy(err, err_len, "secret file ");
    str_append(err, err_len, path);
    str_append(err, err_len, ": ");
    str_append(err, err_len, err_text(errno));
    return -1;
  }
  size_t n = 0;
  while (n < cap) {
    ssize_t r = read(fd, out + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  uint8_t extra;
  bool too_long = n == cap && read(fd, &extra, 1) == 1;
  ::close(fd);
  if (n == 0 || too_long) {
    str_copy(err, err_len, "secret file ");
    str_append(err, err_len, path);
    str_append(err, err_len, n == 0 ? ": empty" : ": longer than 4096 bytes");
    return -1;
  }
  return (long)n;
}

void challenge_proof(const uint8_t* secret, size_t secret_len, const uint8_t nonce[32], char out[64]) {
  uint8_t mac[kSha256Size];
  hmac_sha256(secret, secret_len, nonce, 32, mac);
  hex_encode(mac, sizeof mac, out);
}

bool Client::fail(const char* a, const char* b, const char* c, const char* d) {
  str_copy(err_, sizeof err_, a);
  str_append(err_, sizeof err_, b);
  str_append(err_, sizeof err_, c);
  str_append(err_, sizeof err_, d);
  return false;
}

bool Client::tcp_connect(const ClientOptions& o) {
  struct sockaddr_storage ss;
  socklen_t slen;
  if (!resolve(o.host, o.port, &ss, &slen)) return fail("coordinator host ", o.host, ": cannot resolve");
  int64_t deadline = now_ms() + (o.connect_timeout_ms > 0 ? o.connect_timeout_ms : 0);
  // Staggered exponential back-off (DMTCP at 16K processes: a burst of connects overwhelms the listener).
  int delay = 5 + (int)(getpid() % 7);
  int last_errno = 0;
  for (;;) {
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail("socket: ", err_text(errno));
    int r = ::connect(fd, (struct sockaddr*)&ss, slen);
    int e = r == 0 ? 0 : errno;
    if (e == EINPROGRESS) {
      int64_t left = deadline - now_ms();
      struct pollfd p = {fd, POLLOUT, 0};
      int pr = poll(&p, 1, left > 1000 ? 1000 : (left > 0 ? (int)left : 0));
      if (pr == 1) {
        socklen_t el = sizeof e;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
      } else {
        e = ETIMEDOUT;
      }
    }
    if (e == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (o.min_fd > 0 && fd < o.min_fd) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, o.min_fd);
        if (moved >= 0) {
          ::close(fd);
          fd = moved;
        }
      }
      fd_ = fd;
      return true;
    }
    ::close(fd);
    last_errno = e;
    if (!transient_connect_error(e) || now_ms() >= deadline) break;
    int64_t left = deadline - now_ms();
    sleep_ms(left < delay ? (int)left : delay);
    delay = delay * 2 > 500 ? 500 : delay * 2;
  }
  return fail("cannot connect to coordinator ", peer_, ": ", err_text(last_errno));
}

bool Client::io_wait(short events, int timeout_ms, const char* what) {
  struct pollfd p = {fd_, events, 0};
  for (;;) {
    int r = poll(&p, 1, timeout_ms);
    if (r > 0) return true;
    if (r == 0) return fail("coordinator ", peer_, ": timed out ", what);
    if (errno != EINTR) return fail("poll: ", err_text(errno));
  }
}

bool Client::connect(const ClientOptions& o, Welcome* w) {
  close();
  io_timeout_ms_ = o.io_timeout_ms;
  str_copy(peer_, sizeof peer_, o.host);
  str_append(peer_, sizeof peer_, ":");
  str_append_u64(peer_, sizeof peer_, o.port);
  if (o.secret_file == nullptr) return fail("no secret file given for coordinator ", peer_);
  uint8_t secret[4096];
  long slen = read_secret_file(o.secret_file, secret, sizeof secret, err_, sizeof err_);
  if (slen < 0) return false;
  void* m = mmap(nullptr, kTxCap + kRxCap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return fail("mmap of client buffers: ", err_text(errno));
  map_ = (uint8_t*)m;
  tx_ = map_;
  rx_ = map_ + kTxCap;
  if (!tcp_connect(o)) {
    char saved[sizeof err_];
    str_copy(saved, sizeof saved, err_);
    close();
    return fail(saved);
  }

  FrameHeader h;
  Payload p;
  int r = recv(&h, &p, o.io_timeout_ms);
  if (r <= 0 || h.type != kChallenge) {
    if (r > 0) fail("coordinator ", peer_, ": expected CHALLENGE, got ", msg_type_name(h.type));
    else if (r == 0) fail("coordinator ", peer_, ": no CHALLENGE (is it a revive coordinator?)");
    close();
    return false;
  }
  uint8_t nonce[32];
  if (!p.get_hex("nonce", nonce, sizeof nonce)) {
    fail("coordinator ", peer_, ": CHALLENGE nonce is not 32 hex bytes");
    close();
    return false;
  }
  char proof[64];
  challenge_proof(secret, (size_t)slen, nonce, proof);
  memset(secret, 0, sizeof secret);

  char host[256];
  const char* host_id = o.host_id != nullptr ? o.host_id : getenv("REVIVE_HOST_ID");
  if (host_id != nullptr && *host_id) str_copy(host, sizeof host, host_id);
  else if (gethostname(host, sizeof host) != 0) str_copy(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  FrameBuilder b(tx_, kTxCap, kHello, next_seq());
  b.add("role", o.role).add_u64("pid", o.pid ? o.pid : (uint64_t)getpid()).add("host", host)
      .add("prog", o.prog).add("restart", o.restart ? "1" : "0").add("proof", proof, sizeof proof);
  if (o.restart || o.upid != 0) b.add_u64("upid", o.upid);
  if (o.mpi_rank != nullptr && o.mpi_rank[0]) b.add("mpi_rank", o.mpi_rank);
  if (b.finish() == 0) {
    fail("HELLO: ", wire_err_str(b.error()), " (prog or host name not valid UTF-8?)");
    close();
    return false;
  }
  if (!send(b)) {
    close();
    return false;
  }
  r = recv(&h, &p, o.io_timeout_ms);
  if (r <= 0 || h.type != kWelcome) {
    if (r > 0 && h.type == kError) {
      char reason[256] = "?";
      p.get_str("reason", reason, sizeof reason);
      fail("coordinator ", peer_, " refused us: ", reason);
    } else if (r > 0) {
      fail("coordinator ", peer_, ": expected WELCOME, got ", msg_type_name(h.type));
    } else if (r == 0) {
      fail("coordinator ", peer_, ": no WELCOME");
    }
    close();
    return false;
  }
  if (w != nullptr) {
    memset(w, 0, sizeof *w);
    uint64_t v = 0;
    p.get_u64("upid", &w->upid);
    p.get_u64("generation", &w->generation);
    p.get_u64("interval", &w->interval);
    p.get_u64("phase_timeout", &w->phase_timeout);
    w->compress = p.get_u64("compress", &v) && v != 0;
    w->fork = p.get_u64("fork", &v) && v != 0;
    w->outside = p.get_u64("outside", &v) && v != 0;
    p.get_str("ckpt_dir", w->ckpt_dir, sizeof w->ckpt_dir);
  }
  return true;
}

bool Client::send(FrameBuilder& b) {
  size_t n = b.finish();
  if (n == 0) return fail("cannot build frame: ", wire_err_str(b.error()));
  return send(tx_, n);
}

bool Client::send(const uint8_t* frame, size_t len) {
  if (fd_ < 0) return fail("not connected to the coordinator");
  size_t off = 0;
  while (off < len) {
    // MSG_NOSIGNAL: a dead coordinator must not SIGPIPE the program we are injected into.
    ssize_t w = ::send(fd_, frame + off, len - off, MSG_NOSIGNAL);
    if (w > 0) {
      off += (size_t)w;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!io_wait(POLLOUT, io_timeout_ms_, "sending")) return false;
    } else {
      return fail("coordinator ", peer_, ": send: ", err_text(errno));
    }
  }
  return true;
}

bool Client::read_exact(uint8_t* p, size_t n, int timeout_ms, bool* timed_out) {
  size_t off = 0;
  *timed_out = false;
  while (off < n) {
    ssize_t r = ::read(fd_, p + off, n - off);
    if (r > 0) {
      off += (size_t)r;
    } else if (r == 0) {
      return fail("coordinator ", peer_, ": connection closed");
    } else if (errno == EAGAIN || errno == EINTR) {
      // Once a frame has started, the rest must follow within the I/O timeout.
      int t = off == 0 ? timeout_ms : io_timeout_ms_;
      struct pollfd pf = {fd_, POLLIN, 0};
      int pr = poll(&pf, 1, t);
      if (pr == 0) {
        *timed_out = off == 0;
        return fail("coordinator ", peer_, off == 0 ? ": timed out waiting" : ": truncated frame");
      }
      if (pr < 0 && errno != EINTR) return fail("poll: ", err_text(errno));
    } else {
      return fail("coordinator ", peer_, ": read: ", err_text(errno));
    }
  }
  return true;
}

int Client::recv(FrameHeader* h, Payload* p, int timeout_ms) {
  if (fd_ < 0) {
    fail("not connected to the coordinator");
    return -1;
  }
  bool timed_out;
  if (!read_exact(rx_, kHeaderSize, timeout_ms, &timed_out)) return timed_out ? 0 : -1;
  WireErr e = decode_header(rx_, h);
  if (e != WireErr::kOk) {
    fail("coordinator ", peer_, ": bad frame: ", wire_err_str(e));
    return -1;
  }
  if (!read_exact(rx_ + kHeaderSize, h->length, io_timeout_ms_, &timed_out)) {
    if (timed_out) fail("coordinator ", peer_, ": truncated frame");
    return -1;
  }
  e = p->parse((const char*)rx_ + kHeaderSize, h->length);
  const char* missing = "";
  if (e == WireErr::kOk) e = check_required(h->type, *p, &missing);
  if (e != WireErr::kOk) {
    fail("coordinator ", peer_, ": bad frame: ", wire_err_str(e));
    str_append(err_, sizeof err_, " ");
    str_append(err_, sizeof err_, missing);
    return -1;
  }
  return 1;
}

void Client::close() {
  // The raw call: inside a program, the engine's close() wrapper keeps this very socket open (fd_guard.cpp).
  if (fd_ >= 0) syscall(SYS_close, fd_);
  fd_ = -1;
  if (map_ != nullptr) munmap(map_, kTxCap + kRxCap);
  map_ = tx_ = rx_ = nullptr;
}

bool report_restore_failure(uint64_t upid, const char* why) {
  const char* port = getenv("REVIVE_COORD_PORT");
  const char* secret = getenv("REVIVE_SECRET_FILE");
  const char* host = getenv("REVIVE_COORD_HOST");
  if (port == nullptr || secret == nullptr) return false;
  return report_restore_failure(host != nullptr && host[0] ? host : "127.0.0.1", uint16_t(strtoul(port, nullptr, 10)),
                                secret, upid, why);
}

bool report_restore_failure(const char* host, uint16_t port, const char* secret_file, uint64_t upid,
                            const char* why, char* err, size_t err_len) {
  if (host == nullptr || secret_file == nullptr || port == 0) return false;
  ClientOptions o;
  o.host = host;
  o.port = port;
  o.secret_file = secret_file;
  o.role = "cli";
  o.connect_timeout_ms = 2000;
  o.io_timeout_ms = 2000;
  static Client c;  // a second client: the caller's own may be half set up
  Welcome w;
  if (!c.connect(o, &w)) {
    if (err != nullptr && err_len > 0) str_copy(err, err_len, c.error());
    return false;
  }
  // One line: the wire's values cannot hold a newline (the engine's message ends with one; that made
  // every report fail to build, and the restart waited forever for the failed process).
  char one_line[1024];
  size_t n = 0;
  for (; why[n] != '\0' && n + 1 < sizeof one_line; ++n) one_line[n] = why[n] == '\n' || why[n] == '\r' ? ' ' : why[n];
  while (n > 0 && one_line[n - 1] == ' ') --n;
  one_line[n] = '\0';
  FrameBuilder b(c.tx_buffer(), Client::kTxCap, kKill, c.next_seq());
  b.add_u64("upid", upid).add("why", one_line);
  bool ok = c.send(b);
  if (!ok && err != nullptr && err_len > 0) str_copy(err, err_len, c.error());
  FrameHeader h;
  Payload p;
  if (ok) c.recv(&h, &p, 2000);  // the coordinator's answer: it has told the others
  c.close();
  return ok;
}

}  // namespace revive::coord
