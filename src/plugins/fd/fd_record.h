// The fd plugin's section: tag "RVFD", u32 pid at checkpoint, u32 count, then per descriptor an FdRecord, its path
// (length-prefixed) and, for a deleted regular file, its contents (content_len bytes).
// Records come in ascending fd order. Also read by `revive restart` (src/plugins/proctree/tree_plan.cpp).
#pragma once

#include <stdint.h>

namespace revive::plugins {

constexpr char kFdTag[] = "RVFD";
// After the records (version 7): the file locks to take again, tag, u32 count, LockRecord each
// (plugins/common/file_locks.h).
constexpr char kLockTag[] = "RVLK";

enum class FdKind : uint32_t {
  kRegular = 1,   // reopened by path, offset restored, size policy applied
  kDeleted = 2,   // regular file unlinked while open: contents saved, recreated as an unlinked file
  kDirectory = 3, // reopened by path
  kCharDev = 4,   // /dev/null, /dev/zero, /dev/urandom...: reopened by path
  kTerminal = 5,  // tty/pty: left alone on 0/1/2, else reopened by path or /dev/null
  kPipe = 6,      // type only (data: distributed issue); 0/1/2 left alone, else /dev/null
  kSocket = 7,
  kFifo = 8,
  kOther = 9,     // epoll, inotify, signalfd, block devices...: /dev/null + warning
  kEventfd = 10,  // counter saved (payload EventfdState), recreated
  kTimerfd = 11,  // clock, remaining time, interval, unread expirations saved (TimerfdState), recreated
  kEpoll = 12,    // registrations saved (EpollItem list), recreated and re-registered after all fds
  kSignalfd = 13, // signal mask saved (u64), recreated; the signals themselves are the signal plugin's
  kInotify = 14,  // watches saved (InotifyHead, then InotifyWatch + path each), recreated with the same wds
};
constexpr uint32_t kMaxFdKind = 14;

struct EpollItem {
  int32_t tfd;
  uint32_t events;  // as the kernel holds them (EPOLLET, EPOLLONESHOT... included)
  uint64_t data;
};

// An inotify instance's payload (section version 6): the head, then per watch in ascending wd order an
// InotifyWatch followed by path_len bytes of its path (no nul): the absolute path the program added it
// by, or /proc/self/fd/<via_fd> for a file renamed or deleted since that the process holds open.
struct InotifyHead {
  uint32_t count;
  int32_t next_wd;  // the wd the program's next inotify_add_watch would have got
  uint64_t pad;
};
struct InotifyWatch {
  int32_t wd;
  uint32_t mask;    // the kernel's (events, IN_ONESHOT, IN_EXCL_UNLINK)
  uint32_t lookup;  // IN_DONT_FOLLOW / IN_ONLYDIR as given to inotify_add_watch
  int32_t via_fd;   // -1, or the descriptor the path goes through
  uint32_t path_len;
  uint32_t pad;
};

struct EventfdState {
  uint64_t count;
  uint32_t semaphore;
  uint32_t pad;
};

struct TimerfdState {
  int32_t clockid;
  uint32_t pad;
  uint64_t ticks;  // expirations not yet read
  int64_t value_sec, value_nsec, interval_sec, interval_nsec;  // it_value is the remaining time
};

// kSocket records of sockets the chan plugin does not rebuild (fd_socket.cpp): how to make one again.
// content_len = sizeof(SocketState) + data_len (0 for sockets the chan plugin rebuilds: a placeholder).
enum SockHow : uint32_t {
  kSockFresh = 1,      // socket() again: never bound or connected (or reset), an unbound UDP socket
  kSockBound = 2,      // and bind to `local` (an unconnected UDP/TCP port, a netlink socket's groups)
  kSockConnected = 3,  // datagram socket: bind to `local` if it had a name, connect to `peer`
  kSockWidowed = 4,    // a Unix stream/seqpacket whose peer closed: a pair, data_len unread bytes, other end closed
};
constexpr uint32_t kSockOpts = 8;           // SO_REUSEADDR, SO_REUSEPORT, SO_BROADCAST, SO_KEEPALIVE,
                                            // SO_RCVBUF, SO_SNDBUF, TCP_NODELAY, IPV6_V6ONLY (-1: n/a)
constexpr uint32_t kSockDataMax = 1u << 16;  // unread bytes of a widowed stream kept
struct SocketState {
  int32_t domain, type, protocol;
  uint32_t how;  // SockHow
  uint32_t local_len, peer_len;
  uint32_t data_len;  // bytes following this record's state (kSockWidowed)
  uint32_t pad;
  int32_t opts[kSockOpts];
  uint8_t local[128], peer[128];  // sockaddr_storage-sized
};

struct FdRecord {
  int32_t fd;
  uint32_t kind;       // FdKind
  int32_t flags;       // F_GETFL, masked to what open() can set again
  int32_t fd_flags;    // F_GETFD (FD_CLOEXEC), and kFdOutside
  int64_t offset;      // -1 when the descriptor has none (pipes, O_PATH...)
  int64_t size;        // st_size at checkpoint (kPipe: F_GETPIPE_SZ)
  int64_t mtime_sec;
  int64_t mtime_nsec;
  uint32_t mode;       // st_mode
  int32_t dup_of;      // an earlier fd sharing this open file description (dup, 2>&1), or -1
  int64_t content_len; // kDeleted: contents; kEventfd/kTimerfd: state; kPipe: buffered data (0 for dups)
  int32_t peer_fd;     // kPipe with both ends in this process (fds > 2): the other end's fd, else -1.
                       // Its buffered data rides on the higher-numbered end's record.
  // kRegular, kDeleted, (since 2026-11-28) kEventfd or (since 2026-11-29) kTimerfd, kSignalfd, kEpoll or
  // kInotify, not a dup: which open file description this is
  // across processes. The topmost process
  // among this one and its ancestors that holds the same description (kcmp KCMP_FILE), and its lowest fd
  // for it: every process of a tree sharing an inherited description records the same pair, so
  // `revive restart` can create the description once and hand it down (docs/process-trees.md).
  // share_pid 0: none (other kinds, kcmp unavailable).
  int32_t share_fd;
  uint32_t share_pid;
  uint32_t stored;  // kDeleted: where its contents are (DeletedStore); 0 for other kinds
};

// Where a kDeleted record's contents are.
enum DeletedStore : uint32_t {
  kStoredHere = 0,      // content_len bytes of contents follow the record
  kStoredInShm = 1,     // this process maps the whole file shared; content is the u64 start address of that
                        // mapping, whose object the engine stores as shared memory, and the restarter hands
                        // that object over for this fd (FdHandOver) instead of a copy (version 4)
  kStoredByHolder = 2,  // the inode is also held through another descriptor (another description, another
                        // process), whose record stores the contents once: content is a DeletedHolder naming
                        // it; the restart recreates ONE inode for all of them (version 5). Or it names a
                        // descriptor in another process that maps the file shared whole (kStoredInShm):
                        // `revive restart` hands that mapped object to this descriptor (issue 13)
};

// The descriptor whose record stores a deleted inode's contents: the first holder of the inode the
// coordinator lists (its lowest fd for it), or, without a coordinator, this process's lowest fd for it.
// Every holder of the inode names the same pair, which is also how the restart groups them.
struct DeletedHolder {
  uint32_t pid;  // the holder's pid in its fd section's header (its kernel pid at checkpoint)
  int32_t fd;
};

// Section schema version (2: share_pid/share_fd; 3: SocketState content for kSocket; 4: in_shm, now
// kStoredInShm; 5: kStoredByHolder, and share_pid/share_fd for kDeleted records too; 6: kInotify; 7: the
// lock list; 8: share_pid/share_fd for kEventfd records too, which a version 7 reader would refuse as
// malformed; 9: and for kTimerfd records; 10: and for kSignalfd, kEpoll and kInotify records). FdRecord has had the
// same size and layout since version 2.
constexpr uint32_t kFdVersion = 10;

// In FdRecord::fd_flags (never an F_GETFD bit): a regular file open for writing that the computation
// shares with writers outside it (plugins/common/outside_files.h). Since 2026-11-29 (images without it
// restore as before).
constexpr int32_t kFdOutside = 0x10000;

// What the restarter prepends to the fd section it hands to the restored process (never in an image):
// "RVHO", i32 exe_fd (the program's executable, to become /proc/self/exe again, or -1), u32 mm_len and
// mm_len bytes (the struct prctl_mm_map the restarter set, 0 if the kernel refused it), u32 n, then n
// FdHandOver: descriptors inherited from the tree's skeleton that carry a shared open file description,
// and for a kStoredInShm record the shared memory object the restarter mapped at its address.
constexpr char kHandOverTag[] = "RVHO";
struct FdHandOver {
  int32_t fd;         // the saved descriptor
  int32_t inherited;  // the descriptor holding its shared description, open in the restored process
};
constexpr uint32_t kMaxHandOver = 1024;

// Deleted-but-open files up to this size are saved in the image; a larger one fails the checkpoint.
// REVIVE_FD_DELETED_MAX_MB overrides it (read at init).
constexpr int64_t kDefaultMaxDeletedBytes = 16 << 20;

const char* fd_kind_name(uint32_t kind);

}  // namespace revive::plugins
