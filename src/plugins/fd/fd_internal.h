// Internals of the fd plugin shared by its files (save, restore, special kinds).
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "inject/plugin.h"
#include "plugins/common/section_io.h"
#include "plugins/fd/fd_record.h"

namespace revive::plugins {

extern const int kReopenFlags;
extern int64_t g_max_deleted_bytes;  // set by fd_init from REVIVE_FD_DELETED_MAX_MB
// REVIVE_FD_UNSUPPORTED=stand-in: a descriptor of a kind that cannot be restored (inotify, pidfd...) comes
// back as /dev/null with a warning; default (refuse): the checkpoint fails naming it.
extern bool g_fd_stand_ins;
int fd_init();
int fd_save(inject::SectionWriter& w);
// Drain phase (coordinator, every process suspended): publishes which regular files this process holds,
// so that save finds descriptions shared with processes that are not its ancestors (fd_save.cpp).
int fd_drain(uint64_t generation, char* msg, size_t cap);
int fd_restore(inject::SectionReader& r, char* msg, size_t cap);

// Restore state: the section, the message buffer, and a line buffer for messages (off the small stack).
struct RestoreCtx {
  In& in;
  char* msg;
  size_t cap;
  uint32_t old_pid;
  char line[PATH_MAX + 200];
};

// Puts the freshly opened descriptor `tmp` at number rec.fd with the saved close-on-exec flag.
int place(RestoreCtx& c, int tmp, const FdRecord& rec);
// /dev/null at rec.fd, with a warning naming the fd, its kind, path and why (why null: a placeholder that
// another plugin replaces, no warning).
int stand_in(RestoreCtx& c, const FdRecord& rec, const char* path, const char* why);

// Kinds whose state is saved beyond their path (fd_special.cpp).
// Save: the payload for an eventfd/timerfd/signalfd record (counter, settings, mask), or -1 if unreadable.
int64_t special_payload(int fd, FdKind kind, void* buf, size_t cap);
// Save: drains a pipe both of whose ends are here into buf and writes it back; the byte count or -errno.
int64_t pipe_peek(int read_end, int write_end, char* buf, size_t cap);
int restore_eventfd(RestoreCtx& c, const FdRecord& rec, const char* path);
int restore_timerfd(RestoreCtx& c, const FdRecord& rec, const char* path);
int restore_signalfd(RestoreCtx& c, const FdRecord& rec, const char* path);
int restore_local_pipe(RestoreCtx& c, const FdRecord& rec);
// Sockets the chan plugin does not rebuild (fd_socket.cpp). Save: fills *s and up to cap unread bytes
// into data; their count (>= 0), or -EAGAIN (refused for now: datagrams queued, a connect in progress)
// or another -errno (cannot be restored), with why saying what the socket is.
int64_t socket_state(int fd, SocketState* s, char* data, size_t cap, char* why, size_t why_cap);
// Restore: makes the socket again at rec.fd from the record's SocketState.
int restore_socket(RestoreCtx& c, const FdRecord& rec);
// Save: an epoll instance's registrations into the static list; their count, or -1.
int epoll_items(int fd, const EpollItem** items);
// Restore: creates the epoll instance; its registrations wait until every fd is back, then epoll_rearm
// applies them (warning for each that fails: a stand-in cannot be watched) or, !apply, forgets them.
int restore_epoll(RestoreCtx& c, const FdRecord& rec, const char* path);
// An epoll instance shared with other processes of the tree: `inherited` (made once by revive restart) at
// rec.fd, this holder's registrations queued for epoll_rearm like restore_epoll's.
int restore_shared_epoll(RestoreCtx& c, const FdRecord& rec, int inherited);
// An inotify instance shared with other processes of the tree: `inherited` (made empty by revive restart)
// at rec.fd. Its watches are added again by one holder, the one the record's share key names (every holder
// lists the same watches: a watch one of them cannot name fails the checkpoint), so the watch descriptors
// come back as saved; the others skip theirs.
int restore_shared_inotify(RestoreCtx& c, const FdRecord& rec, int inherited);
// The pid this process had at its last save (the checkpoint being restored): share keys name it.
pid_t fd_saved_self();
void epoll_rearm(bool apply);
// For the chan plugin, which puts sockets, pipes and FIFOs back after this plugin's restore (where their
// registrations failed on /dev/null stand-ins): every epoll instance that watched fd at checkpoint
// watches it again, same events and data. The registrations are kept from restore until the next one.
void epoll_rewatch(int fd);

// inotify instances (fd_inotify.cpp). Save: the record's content (watches with their paths) into a static
// buffer, its length; or -EAGAIN (events queued: refused for now) / -ENOTSUP (a watch whose path is
// unknown) with why saying what the instance is.
// shared: the key prefix "gen.<G>.inow.<host>.<share pid>.<share fd>." of an instance other processes
// may hold (nullptr: none, or no coordinator); owner: this holder's list is the one restored. A holder
// that is not the owner publishes the paths it knows under shared and lists only those (its list is not
// restored); the owner looks up there, for a while, a watch it did not see added (another holder added
// it: since 2026-11-29).
int64_t inotify_state(int fd, const char** content, char* why, size_t why_cap, const char* shared = nullptr,
                      bool owner = true);
// Restore: makes the instance at rec.fd; its watches wait until every fd is back (a watch may go through
// a descriptor of the process), then inotify_rearm adds them with the same wds. 0 or a failure (message
// in c). inotify_reset forgets what an earlier, failed restore left.
int restore_inotify(RestoreCtx& c, const FdRecord& rec, const char* path);
int inotify_rearm(RestoreCtx& c);
void inotify_reset();

// File locks (fd_locks.cpp). Save: after the records, the locks of every regular file and directory
// (tag, count, records); 0 or the refusal's -errno (a lease). Restore: takes them again once every fd is
// back (a section without the list, version 5 or 6, has none); 0 or a failure naming the fd and lock.
int locks_save(Out& out, const int* fds, int n);
int locks_restore(RestoreCtx& c);
// The checkpoint fails (-ENOTSUP) or is refused for now (-EAGAIN) because of fd, which is `what`
// (fd_save.cpp); hint: name REVIVE_FD_UNSUPPORTED.
int refuse_fd(int fd, const char* what, int rc, bool hint = true);

// This process's memory map (fd_maps.cpp). One /proc/self/maps line; path points into a static buffer,
// valid during the callback only.
struct MapLine {
  uint64_t start, end, offset, dev_major, dev_minor, ino;
  bool shared;
  const char* path;
};
// Calls f for each line of /proc/self/maps until it returns false (no allocation: save may call it).
void each_map(bool (*f)(const MapLine&, void*), void* arg);
// The start of a shared mapping of the whole file st at offset 0 here, or 0; *part (if given): when there
// is none, the first shared mapping of the file here (in part: offset != 0 or shorter than the file),
// else all zero (part->end == 0).
uint64_t shared_mapping_of(const struct stat& st, MapLine* part = nullptr);

}  // namespace revive::plugins
