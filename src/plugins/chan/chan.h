// Channels plugin: connected stream sockets between processes of one computation. At checkpoint the data
// in flight is drained (drain phase: a marker per direction, read until the peer's marker), kept in
// memory that the image carries, and put back by handing it to the sender, which writes it again (DMTCP's
// refill). On restart each connection is rebuilt through the coordinator's PUBLISH/LOOKUP and dup3'd onto
// its old number; listening sockets bind their port again. See docs/channels.md.
#pragma once

#include <netinet/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

namespace revive::chan {

enum Kind : uint32_t {
  kConn = 1,       // connected stream socket (TCP, Unix) whose peer is in the computation
  kListen = 2,     // listening stream socket (TCP, Unix bound to a path or abstract name)
  kOutside = 3,    // connected stream socket to a peer outside the computation
  kFifo = 4,       // named FIFO: its buffered bytes are drained by the reader (no marker needed)
  kPipe = 5,       // anonymous pipe end whose other end is in another process of the computation
  kPipeOut = 6,    // anonymous pipe end whose other end is not (left to the fd plugin)
  kBacklog = 7,    // connected end whose connection sat in an internal listener's backlog at checkpoint:
                   // rx holds the bytes it had sent; it connects to the listener again and re-sends them
  kGone = 8,       // the plugin's own end of a backlog connection, accepted at save and closed again
  kPtyMaster = 9,  // pseudo-terminal master (/dev/ptmx): its pair is rebuilt, pending output kept
  kPtySlave = 10,  // pseudo-terminal slave whose master is in the computation (Open MPI's rank stdout)
  kPtyOut = 11,    // pseudo-terminal slave whose master is not (the user's terminal): the fd plugin's
  kDgramBound = 12,  // datagram socket bound to a name, connected to nobody (UCX's Unix sockets that peers
                     // sendto, UDP): bound to its name again, its queued datagrams kept (chan_dgram_name.cpp);
                     // or a connected UDP socket (dgram_peer): bound and connected again, made once by one
                     // holder and handed to the others like any shared socket
  kAlias = 13,     // a socket another entry stands for (a dup here, or one held by several processes:
                   // MPICH's launcher leaks its sockets into every rank): only that entry drains it,
                   // and on restart this number gets the socket it rebuilt (chan_shared.cpp)
};

// Growable byte buffer on mmap (usable with user threads held; its pages are process memory, so the
// drained bytes reach the image with the rest of memory).
struct Bytes {
  uint8_t* p;
  size_t len, cap;
  bool reserve(size_t n);  // room for n more bytes
  void clear() { len = 0; }
};

struct Chan {
  int32_t fd;
  uint32_t kind;
  int32_t family;
  int32_t type;      // SOCK_STREAM; Unix sockets also SOCK_DGRAM, SOCK_SEQPACKET (messages: rx and back
                     // then hold records [u32 length][bytes], boundaries and order kept)
  int32_t flags;     // F_GETFL (O_NONBLOCK...)
  int32_t cloexec;   // FD_CLOEXEC
  int32_t nodelay;   // TCP_NODELAY
  int32_t v6only;    // IPV6_V6ONLY of an AF_INET6 socket (a listener on [::]:P beside one on 0.0.0.0:P)
  sockaddr_storage local, peer;  // sockaddr_in, sockaddr_in6 or sockaddr_un
  uint32_t local_len, peer_len;
  char key[80];       // hex(local, peer): this end's name; the peer names it reversed
  char peer_key[80];
  bool acceptor;      // restart: this end listens, the other connects (the smaller key listens)
  // Run-time state of the phases.
  Bytes rx;           // drained: bytes the peer had sent that we had not read, in order
  Bytes back;         // refill: the peer's drained bytes, to be written back to it
  size_t sent, got;   // progress of the marker / refill exchange (messages: counted in messages)
  size_t tx_off, wb_off;  // messages: offset of the next record of rx to send, of back to write back
  uint64_t want;      // refill: length announced by the peer
  bool rx_done, tx_done, done;
  int listen_fd;      // restart: acceptor's temporary listener
  char path[512];     // kFifo: the FIFO's path
  uint64_t ino;       // kFifo, kPipe: its inode (one drain per FIFO or pipe)
  int pipe_w;         // kPipe reader at restart: the new pipe's write end, handed to the writers
  // Half-closed connections (shutdown): wr_shut = this end shut its writing side (seen at the scan), eof =
  // the drain ended on the peer's end of file instead of its marker (the peer shut its writing side).
  // Either way the connection cannot carry the refill exchange in both directions, so it is rebuilt
  // (rebuild), refilled over the new one, and the end that had shut its writing side shuts it again.
  // rd_shut = this end shut its receiving side (shutdown(SHUT_RD), the peer has not closed): the kernel
  // still queues what the peer sends, so the drain reads the peer's marker past our own end of file; the
  // connection is rebuilt too (the marker tells the peer: kRebuildMark), and the end shuts it again.
  // rebuild_asked: the peer's marker asked for the rebuild.
  bool wr_shut, eof, rebuild, rd_shut, rebuild_asked;
  // The drain hit a hard error on this connection (a peer killed during the checkpoint resets it): left
  // out of the rest of the drain and of the refill, so the other connections still exchange their
  // markers and this process's peers are not left waiting for one (the checkpoint fails all the same).
  bool broken;
  // The drain ended on the peer's reset (ECONNRESET: it died with bytes of ours unread). Our own marker
  // may be those bytes: the program is given the reset after the peer's last bytes only when bytes of
  // the program's were unread too (unread_out: SIOCOUTQ before the marker), else end of file, as it would
  // have seen without the checkpoint.
  bool reset, unread_out;
  uint64_t peer_upid;  // the peer's process (published with its end in the drain phase; 0: unknown)
  // kPipe, kFifo read end: this process drains it and, for a pipe, rebuilds it on restart. A pipe or FIFO
  // read by several processes (workers sharing a queue) has one owner, or each would drain the same bytes.
  bool owner;
  bool dgram_peer;    // kDgramBound: a connected UDP socket (connected to c.peer again after the bind)
  int32_t rcvbuf;     // kDgramBound: SO_RCVBUF, given to the new socket before its queue is put back
  Bytes src;          // kDgramBound not connected: each queued datagram's source, in rx's order, records
                      // [u32 length][sockaddr] (length 0: an unnamed sender); chan_udp.cpp
  bool dgram_internal;  // dgram_peer whose peer is in the computation: connected to its new address
  bool shared;        // kPipeOut with both ends here that another process holds too (classify_pipes)
  // Backlog connections (chan_backlog.cpp): 1 = accepted by the plugin at save from a listener's backlog,
  // 2 = this end's connection waits in an internal listener's backlog.
  uint8_t backlog;
  // kPtyMaster: the pair's terminal settings and window size, restored on the new pair. ino holds the
  // pty's index (/dev/pts/<index>), which names the pair for the rendezvous.
  struct termios tio;
  struct winsize ws;
  // A pty end that shares the open file description of entry pty_same - 1 of this process (dup, kcmp); 0:
  // none. A slave opened twice is two descriptions (own flags and access mode): rebuilt as two.
  uint32_t pty_same;
  // kPtySlave: the pair's slave is the controlling terminal of this process's session, which this process
  // leads; fg_pgrp is the terminal's foreground group (as the program knows ids). The restored leader
  // makes the new slave its session's terminal again and gives it that foreground group.
  bool ctty;
  int32_t fg_pgrp;
  bool fg_own;  // fg_pgrp was this process's own group (restored alone, that group is its new one)
  // Sockets held more than once (chan_shared.cpp): alias 1 = a dup of entry alias_of of this process,
  // 2 = another process of the computation holds the socket and drains and rebuilds it. share_fd: on
  // restart, the owner's listener that hands the socket to the other holders / an alias's connection to it.
  uint8_t alias;
  bool alias_conn;    // alias 2 of a connection (not a listener): wait for its owner's refill at resume
  uint32_t alias_of;
  int share_fd;
};

constexpr size_t kMaxChans = 256;
extern Chan g_chans[kMaxChans];
extern uint32_t g_nchans;
extern bool g_drain_ran;  // the drain phase of g_gen ran in this checkpoint (until resume)
extern bool g_drained;  // data was drained in this checkpoint: refill before threads run
extern uint64_t g_gen;  // generation of the drain phase
extern int g_pty_dropped;  // a pty master the last scan left out (table full), or -1

// chan_scan.cpp: fills the table with this process's stream sockets (connected ones as kOutside for now).
int scan(char* msg, size_t cap);
// chan_drain.cpp: drain phase: table, PUBLISH of every connection, FIFOs drained. drain_sockets, at
// save: which connections are internal (LOOKUP), then their data in flight is drained.
int drain(uint64_t gen, char* msg, size_t cap);
int drain_sockets(uint64_t gen, char* msg, size_t cap);
// An outside connection's unread bytes, peeked into c.rx (given back before end of file at restart).
int keep_outside_bytes(Chan& c, char* msg, size_t cap);
// chan_refill.cpp: hands drained socket bytes back to the senders, which write them again; a restored
// process also writes its FIFOs' bytes back (the original put them back during the drain).
int refill(bool restored, char* msg, size_t cap);
// chan_connect.cpp: restored process. restore_local: listeners and outside connections, at restore;
// reconnect: internal connections, in the reconnect phase.
int restore_local(char* msg, size_t cap);
int reconnect(uint64_t gen, char* msg, size_t cap);
// Original process, at resume: half-closed connections get a new connection (rendezvous "chanh.<G>..."),
// like a restart's, before the refill runs over it.
int rebuild_half_closed(uint64_t gen, char* msg, size_t cap);
// The rendezvous of a rebuilt connection: publish this end's new address under "<prefix><G>.<key>", or wait
// (60 s) for the peer's under its key (*n: the address length). 0 or -errno with a message.
int publish_addr(const Chan& c, uint64_t gen, const char* prefix, const sockaddr_storage& a, socklen_t len,
                 char* msg, size_t cap);
int lookup_addr(const Chan& c, uint64_t gen, const char* prefix, sockaddr_storage* a, size_t* n, char* msg,
                size_t cap);
// Puts socket s at c.fd (replacing whatever is there) with c's saved flags and epoll registrations.
int place_socket(Chan& c, int s, char* msg, size_t cap);
// chan_fifo.cpp: named FIFOs. Drain reads what the FIFO buffers (read ends); put_back writes it again;
// reopen_fifos reopens read ends (readers) at restore, write ends (writers) at reconnect, when every
// reader is back. consider_fifo fills a table slot (false: not a named FIFO).
bool consider_fifo(int fd, Chan& c);
// chan_pipe.cpp: anonymous pipes between processes. Readers publish "piper.<G>.<ino>" = their pid in the
// drain, writers "pipew.<G>.<ino>"; at save each looks up the other (found: kPipe, else kPipeOut), and a
// reader whose pid is the one the table kept owns the pipe (FIFO readers likewise under "fifor."). Restart:
// the owner makes a new pipe and hands its write end to each writer, its read end to each other reader,
// over a Unix socket (SCM_RIGHTS): they connect in reconnect, the owner serves them all in refill (every
// connect is queued by then: the phases are barriers).
bool is_reader(const Chan& c);
// The owner of a rebuilt pipe or pty listens on an abstract Unix socket published under key k;
// the other holders reach it there and say which end they want (one byte). 0 or an errno value.
int handover_listen(const char* k, int* listen_fd);
int handover_reach(const char* k, char end, int timeout_ms, int* sock);
// chan_dgram_name.cpp: bound_name says whether a local address names something others can send to;
// keep_datagrams (save) keeps the queued datagrams of every kDgramBound socket and queues them again (a
// connected UDP socket's are only peeked: only its peer may send to it, chan_udp.cpp); rebind_datagram
// (restore) binds one's name again and queues the kept datagrams there.
bool bound_name(int family, const sockaddr_storage& a, socklen_t len);
// chan_connect.cpp: the address peers can reach this host at: our end of the coordinator connection (same
// family; its port is meaningless), else c's old local address.
void my_address(const Chan& c, sockaddr_storage* a);
// chan_connect.cpp: binds socket s to c's old name again (listeners, bound datagram sockets).
// at: another address (same options); wait_ms: how long EADDRINUSE is waited out (-1: the default 2 s).
bool bind_again(const Chan& c, int s, const sockaddr_storage* at = nullptr, int wait_ms = -1);
// A TCP state past the peer's FIN (CLOSE_WAIT, LAST_ACK, CLOSING, TIME_WAIT, CLOSE): an end of file read on
// such a connection is the peer's, not our own shutdown(SHUT_RD).
// An IP socket address's port (sin6_port sits at sin_port's offset).
inline uint16_t port_of(const sockaddr_storage& a) { return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port); }
inline uint16_t port_of(const sockaddr* a) { return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port); }
inline bool tcp_fin_in(int state) {
  return state == TCP_CLOSE_WAIT || state == TCP_LAST_ACK || state == TCP_CLOSING || state == TCP_TIME_WAIT ||
         state == TCP_CLOSE;
}
int keep_datagrams(char* msg, size_t cap);
int rebind_datagram(Chan& c, char* msg, size_t cap);
// chan_udp.cpp: a bound datagram socket's queue. keep_udp_queue (save) peeks it into c.rx (and, not
// connected, each datagram's source into c.src), leaving it as it was; requeue_udp (restore) queues c.rx
// at s, bound and not yet connected, each datagram sent from its source's address (connected: c.peer).
int keep_udp_queue(Chan& c, char* msg, size_t cap);
int requeue_udp(Chan& c, int s, char* msg, size_t cap);
// A datagram requeue_udp queued from a stand-in sender (its source could not be bound here: an outside
// process holds it without SO_REUSEADDR, another host's address without CAP_NET_ADMIN): true when `from`
// (len bytes, as received) is such a stand-in, rewritten to the source the datagram had; the stand-in's
// count of datagrams goes down unless peek (MSG_PEEK: the same datagram is read again). Since 2026-11-29;
// before, recvfrom reported the stand-in's address. IP only (an unnamed Unix sender has no address).
bool standin_source(sockaddr* from, socklen_t len, bool peek);
// A connected UDP socket whose peer is in the computation (dgram_internal, found at save: the peer
// published "chanu.<G>.<its key>" in the drain) is restored bound, not connected: in the reconnect phase
// udp_publish publishes its new address under "chanv.<G>.<key>" (every process, before anything waits),
// udp_connect looks the peer's up (it may have moved to another host), queues the kept datagrams from
// there and connects to it.
int udp_publish(uint64_t gen, char* msg, size_t cap);
// Restore: c's address is not on this host (EADDRNOTAVAIL): *s = a new socket bound to the same port on
// every address (connect() picks this host's); or an error saying what cannot be bound.
int rebind_elsewhere(Chan& c, int* s, char* msg, size_t cap);
int udp_connect(uint64_t gen, char* msg, size_t cap);
inline bool udp_deferred(const Chan& c) { return c.kind == kDgramBound && c.dgram_peer && c.dgram_internal; }
// A table slot made empty for a new entry; its drain buffers stay mapped (reused across checkpoints).
void reset_slot(Chan& c);
// chan_pty.cpp: pseudo-terminal pairs inside the computation (Open MPI gives each rank's stdout a pty
// whose master mpiexec reads). consider_pty fills a table slot (false: not a pty). Drain phase: master
// holders publish; save: slaves find out whether their master is ours, the master's owner keeps the
// output not read yet (and leaves it in the pair). Restart: the owner makes a new pair, writes that output
// into it again and hands the master/slave to the other holders like a pipe's ends.
bool consider_pty(int fd, const struct stat& st, Chan& c);
void publish_ptys(uint64_t gen);
int classify_ptys(uint64_t gen, char* msg, size_t cap);
int ptys_listen(uint64_t gen, char* msg, size_t cap);    // reconnect, step 1 (owners)
int ptys_connect(uint64_t gen, char* msg, size_t cap);   // reconnect, step 2 (other holders)
int ptys_hand_over(char* msg, size_t cap);               // refill
// chan_pty.cpp, used by chan_pty_alone.cpp: keep_pty_output reads what waits at master entry c (writers
// suspended) into c.rx and writes it back through the slave; write_through_slave writes such bytes through
// the slave of master m (untranslated: output processing off meanwhile), so they wait at m again.
int keep_pty_output(Chan& c, char* msg, size_t cap);
bool write_through_slave(int m, const uint8_t* p, size_t n);
int pty_err(char* msg, size_t cap, const Chan& c, const char* what, int e);
int pty_put_at(Chan& c, int s, char* msg, size_t cap);  // s at c.fd, c's flags and epoll registrations
// Once every slave is at its number: the slave that was the session's controlling terminal made it again,
// with its foreground group. `alone` (no coordinator, chan_pty_alone.cpp): only a slave whose master this
// process holds too (the pair came back whole), and this process first leads a new session, as it did
// at the checkpoint (nothing recreated its session). A warning, never a failed restart, when refused.
void give_back_ctty(bool alone);
// chan_pty_alone.cpp: pty pairs without a coordinator. classify_ptys_alone (a standalone checkpoint's
// save): a slave whose master this process does not hold is the user's terminal (kPtyOut, the fd
// plugin's); the first entry of each master keeps the output waiting at it. restore_ptys_alone (restore
// without a coordinator: a standalone image, or one image of a computation alone): a pair held here whole
// is made again at its numbers; a master whose slave holders do not come back is widowed (its new slave
// opened and closed: reads EIO), a slave whose master does not come back too (its new master closed).
int classify_ptys_alone(char* msg, size_t cap);
int restore_ptys_alone(char* msg, size_t cap);
void publish_pipes(uint64_t gen);                          // drain phase (FIFO readers too)
int classify_pipes(uint64_t gen, char* msg, size_t cap);   // save: kPipe or kPipeOut, owners, then drain
int pipes_listen(uint64_t gen, char* msg, size_t cap);   // reconnect, step 1 (readers)
int pipes_connect(uint64_t gen, char* msg, size_t cap);  // reconnect, step 2 (writers)
int pipes_hand_over(char* msg, size_t cap);              // refill, before the bytes go back
int drain_buffered(uint32_t kind, char* msg, size_t cap);  // kFifo or kPipe, owners only (save)
int put_back_fifos(uint32_t kind /* 0: FIFOs and pipes */, bool keep, char* msg, size_t cap);
int reopen_fifos(bool writers, char* msg, size_t cap);

// chan_backlog.cpp: connections still in a listener's backlog (connect done, accept not yet). Drain phase:
// the listener's process publishes "chanb.<G>.<name>" for each (found by sock_diag). Save: it decides
// (all its pending peers are in the computation: "chanbd.<G>.<name>" = 1, else 0), accepts them and drains
// them like any connection; then hands each client the bytes it had sent and closes its end. The client
// connects to the listener again at resume (restart: reconnect) and re-sends them, so the program's
// accept() returns the connection and reads every byte once.
void publish_backlogs(uint64_t gen);
int backlog_accept(uint64_t gen, char* msg, size_t cap);  // save, listener side, before the drain
int backlog_join(uint64_t gen, Chan& c, char* msg, size_t cap);  // save, client side, per kOutside entry
int backlog_transfer(char* msg, size_t cap);               // save, after the drain
int backlog_reconnect(char* msg, size_t cap);              // resume / reconnect
// Listener ports another program took (chan_portmap.cpp). portmap_virtual: the program's port of listener c
// when an earlier restart moved it (0: its own). portmap_note: relisten put the listener at fd on port
// `real` for the program's `virt`. portmap_publish (reconnect, first): every restored TCP listener says
// where its program's port listens now. portmap_load (refill): this host's moved ports, for connect().
// portmap_retarget (a restored process's reconnect, after its publish): `to`, an address of this host, gets
// the port its listener listens on now (waits up to 10 s for that listener's publish; false, `to` left,
// when `to` is not this host's, outside a restart's reconnect, or nothing was published).
uint16_t portmap_virtual(const Chan& c);
void portmap_note(int fd, uint16_t virt, uint16_t real);
int portmap_publish(uint64_t gen, char* msg, size_t cap);
int portmap_load(uint64_t gen);
bool portmap_retarget(sockaddr_storage* to);
// portmap_origin (scan, an IP listener or bound UDP socket seen): notes this host's addresses, once per
// host a process lives on, among those its sockets on every address may be known at. portmap_rewrite: where a connect to `to` must go (a moved port
// of this host, or a listener's old address on a host it left; udp: a bound UDP socket's old address);
// false: to itself. portmap_any: whether there is any route (else connect() need not look).
void portmap_origin();
bool portmap_rewrite(const sockaddr* to, socklen_t len, bool udp, sockaddr_storage* out);
bool portmap_any();

// chan_shared.cpp: a socket (one inode: a socket has a single open file description) may sit at several
// numbers of one process (dup) and in several processes (inherited across fork and exec). Exactly one
// entry must send its marker, drain, refill and rebuild it, or the peer receives several markers and the
// bytes in flight are split between the holders. consider() marks dups (alias 1) as it scans. In the drain
// phase every process publishes "socko.<G>.<host>.<ino>" = its pid for the sockets it holds; at save the
// one the coordinator kept is the owner and the others become aliases (alias 2). On restart the owner
// rebuilds the socket as usual and hands it to the other holders over a Unix socket (SCM_RIGHTS; they
// connect in reconnect, it serves them first thing in refill, as pipes are handed over).
void publish_sockets(uint64_t gen);                                // drain phase
int elect_sockets(uint64_t gen, char* msg, size_t cap);            // save, before anything is drained
int shares_listen(uint64_t gen, char* msg, size_t cap);            // reconnect, first (owners)
int shares_connect(uint64_t gen, char* msg, size_t cap);           // reconnect (other holders)
int shares_serve(char* msg, size_t cap);                           // refill, before anything waits
int shares_receive(char* msg, size_t cap);                         // refill
int place_local_aliases(char* msg, size_t cap);  // dups get their entry's socket, wherever it was rebuilt
// Original process, at resume: the other holders' threads must not run (read the socket, write into it)
// while the owner refills it. Owners publish "sockr.<G>.<host>.<ino>" once their refill is over (done or
// failed); holders wait for it (60 s) before their threads are released. Owners never wait: no cycle.
void publish_refilled();
int wait_refilled(char* msg, size_t cap);
// chan_shared_resume.cpp: a shared socket its owner rebuilds at resume (half-closed, backlog client) goes
// to the other holders too. listen_for_rebuilt: save, each other holder of a connection listens and
// publishes "sockh.<G>.<host>.<ino>.<pid>"; hand_rebuilt: owner, at resume once rebuilt, sends it to each
// (never waits for them); take_rebuilt: other holders, after wait_refilled, put it in place (or keep the
// old one if nothing came: not rebuilt) and close their listeners.
int listen_for_rebuilt(Chan& c, uint64_t gen, char* msg, size_t cap);
int hand_rebuilt(char* msg, size_t cap);
int take_rebuilt(char* msg, size_t cap);
// "<prefix><G>.<host>.<ino>": the coordinator key of a shared socket (host: the boot id's first digits).
void share_key(char* out, size_t cap, const char* prefix, uint64_t gen, uint64_t ino);
// Descriptor passing (pipes and shared sockets): a listener on an autobound abstract Unix name, non-blocking
// (its address hex-encoded into hexaddr), and a connection to one; one descriptor with one byte over a
// Unix socket, and its receipt (waiting up to timeout_ms). -1 / false with errno.
int listen_abstract(char* hexaddr, size_t cap);
int connect_abstract(const char* hexaddr);
bool send_fd(int s, int fd, char byte);
int recv_fd(int s, int timeout_ms);
bool is_stand_in(int fd);  // the fd plugin's /dev/null stand-in is still at fd
// Connections, pipes and shared sockets rebuilt only through the coordinator: a process restored alone
// gets them widowed (the other end closed) at restore, with a warning (chan_connect.cpp).
bool widowed_alone(const Chan& c);

// Message sockets (Unix SOCK_DGRAM, SOCK_SEQPACKET), chan_msg.cpp: one datagram into a record of b; the
// length of the next queued datagram (-errno; -EPIPE at a SOCK_SEQPACKET end of file); the record at *off
// sent as one datagram (true: sent, *off moved on; false with errno).
inline bool is_msg(const Chan& c) { return c.type == SOCK_DGRAM || c.type == SOCK_SEQPACKET; }
ssize_t next_msg_len(const Chan& c);
bool recv_msg(const Chan& c, Bytes& b, size_t len);
bool send_record(const Chan& c, const Bytes& b, size_t* off);
size_t count_records(const Bytes& b);
// Rebuilds a SOCK_DGRAM pair: step 1 binds (old name, else autobind) and publishes the address under
// "<prefix><G>.<key>", step 2 connects to the peer's (waiting for it).
int dgram_bind(Chan& c, uint64_t gen, const char* prefix, char* msg, size_t cap);
int dgram_connect(Chan& c, uint64_t gen, const char* prefix, char* msg, size_t cap);

// Helpers (chan_scan.cpp).
// Calls f(fd, arg) for every descriptor of this process (/proc/self/fd, getdents64). 0 or -errno.
int each_fd(void (*f)(int fd, void* arg), void* arg);
// Adds socket fd to the table (connected: kOutside, named by its addresses); false if it is not one.
bool add_socket(int fd);
size_t addr_key(const sockaddr_storage& ss, uint8_t* out);  // address+port as key material
void make_keys(Chan& c, const uint8_t* a, size_t la, const uint8_t* b, size_t lb);
size_t addr_len(int family);  // of an inet address (sockaddr_in / sockaddr_in6)
// Unix socket: the inode of the socket at the other end of socket `ino` (sock_diag), 0 if none.
// *shutdown (if given): the socket's own shutdown bits (1: receiving side shut, 2: sending side shut).
uint64_t unix_peer_ino(uint64_t ino, uint8_t* shutdown = nullptr);
// TCP connection (local, peer): its own shutdown bits as inet_diag reports them (1: receiving side shut,
// by shutdown(SHUT_RD) or by the peer's FIN; 2: sending side shut), -1 if not found.
int tcp_shutdown_bits(const sockaddr_storage& local, const sockaddr_storage& peer);
// A sock_diag netlink request (req starts with its nlmsghdr; length and type are filled in here): the
// netlink socket to read the answer from, or -1.
int diag_request(void* req, size_t len);
// Unix listener `ino`: the inodes of the clients whose connections wait in its backlog (sock_diag
// UNIX_DIAG_ICONS; the queued sockets themselves have no inode yet); count or -1.
int unix_icons(uint64_t ino, uint32_t* out, int max);
// TCP listener c: the (local, peer) addresses of the connections in its backlog (established, no socket
// file yet: inode 0), from inet_diag; count or -1.
int tcp_pending(const Chan& c, sockaddr_storage* local, sockaddr_storage* peer, int max);
void hex(char* out, size_t cap, const void* p, size_t n);
void unhex(const char* s, uint8_t* out, size_t cap, size_t* n);  // lowercase hex from hex(); *n bytes
uint64_t now_ms();
// Waits until fds[i] has events (poll), at most ms. Returns poll's count or -errno.
int wait_fd(int fd, short events, int ms);

}  // namespace revive::chan

namespace revive::plugins {
// The fd plugin's (fd_special.cpp): re-registers fd with the epoll instances that watched it at checkpoint.
// Called after each descriptor this plugin puts back on restart.
void epoll_rewatch(int fd);
}  // namespace revive::plugins
