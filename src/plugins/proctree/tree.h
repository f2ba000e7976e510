// Restart side of process trees (`revive restart`): which image is whose child, and the processes that
// recreate the tree with the recorded pids before each one restores its own image.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "image/view.h"
#include "plugins/fd/fd_record.h"
#include "plugins/proctree/proctree_record.h"
#include "plugins/vpid/vpid_table.h"

namespace revive::proctree {

// A regular file descriptor of an image and which open file description it was across processes (the fd
// section's share_pid/share_fd: equal pairs in two images = one description, one offset).
struct FileRef {
  int32_t fd = -1;
  uint32_t key_pid = 0;
  int32_t key_fd = -1;
  int32_t flags = 0;  // F_GETFL as saved (access mode, O_APPEND...)
  std::string path;
  // A deleted file (fd section version 5): which inode it is across processes (the DeletedHolder that
  // stores its contents, plugins/fd/fd_record.h), and those contents when this record stores them.
  bool deleted = false;
  std::pair<uint32_t, int32_t> inode{0, -1};
  uint32_t mode = 0;
  bool has_contents = false;
  std::string contents;
  int recreated = -1;  // index into TreePlan::deleted when the restart recreates its inode (PlanDeleted)
  // An eventfd's description (fd section, kEventfd with a share key): made with eventfd(), not opened.
  bool eventfd = false;
  uint64_t efd_count = 0;
  bool efd_semaphore = false;
  // A timerfd's (kTimerfd with a share key): made with timerfd_create and armed as saved.
  bool timerfd = false;
  plugins::TimerfdState tfd{};
  // A signalfd's (kSignalfd with a share key): made with signalfd4 and the saved mask.
  bool signalfd = false;
  uint64_t sfd_mask = 0;
  // An epoll instance's (kEpoll with a share key): made empty; each holder registers its targets again.
  bool epoll = false;
  // An inotify instance's (kInotify with a share key): made empty; one holder adds the watches again.
  bool inotify = false;
};

// A deleted file held by two or more processes of the plan: `revive restart` recreates it once, unlinked,
// with the stored contents, before the roots (tree_deleted.cpp); every description of it is a SharedFile
// opened through it, so a write through one holder is seen by all.
struct DeletedFile {
  std::string path;  // as the image records it, "<path> (deleted)": where to recreate it
  uint32_t mode = 0;
  std::string contents;
  // Or the shared memory object a process (shm_proc) maps at shm_at, which another process only holds
  // open (issue 13): not recreated, the object itself (plan.shm[shm], LinkDeletedShm) is handed down.
  int shm_proc = -1;
  uint64_t shm_at = 0;
  int shm = -1;
};

// An open file description several processes of the tree shared: created once, by `owner` before it
// forks (or by `revive restart` before the roots, owner -1), and inherited by every member.
struct SharedFile {
  std::string path;
  int32_t flags = 0;
  int owner = -1;                            // index into procs; -1: revive restart itself
  int deleted = -1;                          // index into TreePlan::deleted: a description of that inode
  std::vector<std::pair<int, int32_t>> members;  // (index into procs, fd in that process)
  bool eventfd = false;  // made with eventfd(efd_count), not opened by path
  uint64_t efd_count = 0;
  bool efd_semaphore = false;
  bool timerfd = false;  // made with timerfd_create and armed with tfd (remaining time, interval, ticks)
  plugins::TimerfdState tfd{};
  bool signalfd = false;  // made with signalfd4(sfd_mask)
  uint64_t sfd_mask = 0;
  bool epoll = false;  // made with epoll_create1, empty (its holders' fd plugins register their targets)
  bool inotify = false;  // made with inotify_init1, empty (the share key's holder adds the watches)
};

// A mapping of a shared memory object in one image (its "shm" section, image/format.h ShmRecord).
struct ShmMap {
  image::ShmRecord rec;
  uint32_t region = 0;  // index in the image's regions
  uint64_t file_offset = 0, len = 0;
  uint64_t start = 0;   // the mapping's address (a kStoredInShm fd record names it)
  bool has_bytes = false;
  int64_t mtime_ns = 0;  // a file's (tmpfs or disk) at the checkpoint; 0 otherwise
  std::string path;
};

struct TreeProc {
  std::string image;
  uint32_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  std::vector<Zombie> zombies;
  // The saved tids of the program's other threads (the leader's is pid; the engine's checkpoint thread is
  // left out: the program never sees its id). Each comes back with clone3 set_tid when free.
  std::vector<uint32_t> tids;
  int parent = -1;            // index of the parent's image; -1: a root (its parent was not checkpointed)
  std::vector<int> children;  // indexes, ascending pid
  std::vector<FileRef> files; // regular files with a share key (from the fd section, if readable)
  int32_t max_fd = -1;        // highest descriptor the image restores
  std::vector<ShmMap> shm;    // shared memory object mappings, in region order
  uint32_t fd_pid = 0;        // the pid the fd section's DeletedHolders name this process by
  // Deleted files this process mapped shared and held open (kStoredInShm): (fd, mapping address).
  std::vector<std::pair<int32_t, uint64_t>> deleted_shm;
  // Those of them whose description other processes shared (inherited): joined to `files` by PlanDeleted
  // when another process holds the file without mapping it, so the description is handed down once.
  std::vector<FileRef> shm_files;
};

// A shared memory object mapped by one or more processes of the plan (same host, dev, inode): created
// once by `revive restart` before the roots (tree_shm.cpp) and handed to each (REVIVE_SHM).
struct ShmPiece {
  int proc;      // index into procs
  size_t index;  // into procs[proc].shm
};
struct ShmObject {
  image::ShmRecord rec;         // of its first mapping
  std::string path;             // as in /proc/PID/maps
  uint64_t extent = 0;          // end of the furthest mapped range
  std::vector<ShmPiece> maps;   // every mapping
  std::vector<ShmPiece> bytes;  // the mappings whose image stores the bytes
};

struct TreePlan {
  std::vector<TreeProc> procs;  // image order
  std::vector<int> roots;
  std::vector<SharedFile> shared;  // descriptions held by two or more processes of the plan
  std::vector<ShmObject> shm;      // shared memory objects of the images
  std::vector<DeletedFile> deleted;  // deleted files held by two or more processes of the plan
};

// tree_deleted.cpp. The images' deleted files grouped by inode: one held by two or more processes becomes
// a DeletedFile, and every description of it a SharedFile (even one held by a single process: it must be
// opened on the one recreated inode). Called by PlanShared before it groups descriptions.
void PlanDeleted(TreePlan* plan);
// Creates the unlinked file of every plan.deleted[d] with its contents at descriptor base + d (inherited
// by the tree). An error names the file and why: nothing of it may be restored as a copy of its own.
// Needs MakeShmObjects first (a deleted file held open in one process and mapped in another is that object).
Status MakeDeletedFiles(const TreePlan& plan, int base);
// After PlanShm: which object each such deleted file is (DeletedFile::shm).
void LinkDeletedShm(TreePlan* plan);

// tree_shm.cpp. The images' shared memory mappings (ReadShm, per image) grouped into objects (PlanShm).
void ReadShm(const image::View& v, TreeProc* out);
void PlanShm(TreePlan* plan);
// The descriptor of plan.shm[k] once MakeShmObjects made it (a memfd or file), or -1.
int ShmObjectFd(size_t k);
// In `revive restart` (or the pid namespace's init) before the roots: every object created and filled
// once; memfds and files at descriptors >= fd_floor, inherited by the tree.
Status MakeShmObjects(const TreePlan& plan, int fd_floor);
// In process i before it execs its restorer: REVIVE_SHM for its mappings; the other objects' fds closed.
void HandShm(const TreePlan& plan, size_t i);
// Our descriptors of the objects closed: in `revive restart` once the roots are forked (a SysV segment
// marked for removal stays attached: MakeShmObjects), in a stand-in parent also every attach (detach).
void CloseShm(bool detach);

// Reads every image's proctree section. NotFound when an image has none (written without the plugin):
// the caller then restores the images as independent processes. Other errors name the image and reason.
Status PlanTree(const std::vector<std::string>& images, TreePlan* plan);

// True when restoring needs the recorded pids: a parent/child relation or a zombie to give back.
bool NeedsTree(const TreePlan& plan);

// Refuses (naming the pid and who holds it) when a recorded pid is in use.
Status CheckPidsFree(const TreePlan& plan);
// The same for the threads' recorded tids (TreeProc::tids): a taken one names the tid and the image. A tid
// taken does not stop a restart: that thread then gets a new id (gettid() differs), unless a pid
// namespace of the restart's own gives it back (WantsPidNamespace).
Status CheckTidsFree(const TreePlan& plan);

// Creates each root as a child of the caller with its recorded pid (clone3 set_tid); each process makes
// its process group/session as recorded, creates its zombies and children (recursively), then calls
// exec_image(index), which must not return. `exact_pids`=false (no privilege, no relations) forks
// normally. Returns the roots' pids in roots_out (same order as plan.roots).
// With `table` (virtual pids, exact_pids false), every process of the skeleton registers (recorded pid,
// its kernel pid), and (recorded zombie pid, kernel pid) for its zombies, before it reports.
// `below` (if given) gets every process of the tree but the roots, with its kernel pid.
struct TreeMember {
  size_t index;  // plan (image) index
  pid_t pid;     // its pid now (the kernel's, in the caller's pid namespace)
};
Status SpawnTree(const TreePlan& plan, bool exact_pids, const std::function<void(size_t)>& exec_image,
                 std::vector<pid_t>* roots_out, vpid::Table* table = nullptr,
                 std::vector<TreeMember>* below = nullptr);

// Virtual pids (tree_vpid.cpp): whether REVIVE_VPID=1 asks for them, and the shared table.
bool WantVirtualPids();
struct VpidTable {
  std::string path;
  vpid::Table table;
};
// Creates /dev/shm/revive-vpid-<uid>-<random> (mode 0600; /tmp without /dev/shm), mapped shared, removed
// when this process exits.
Status CreateVpidTable(VpidTable* out);

// As pid 1 of a pid namespace of our own: each root gets a stand-in parent with the recorded ppid (its
// real parent was outside the computation), so getppid() returns what it did.
void SetStandInParents(bool on);

// tree_ns.cpp. Whether this process may choose pids (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE effective).
bool HasPidPrivilege();

// Whether the images' recorded pids should come back in a new pid namespace: they record a process tree
// and this process cannot recreate its pids here (no privilege, or a pid or a thread's tid is in use, e.g.
// by a restart of the same checkpoint running beside this one). *why says which. REVIVE_PIDNS=0 never,
// =1 always.
bool WantsPidNamespace(const std::vector<std::string>& images, std::string* why);

// Runs body() as pid 1 of a new pid and mount namespace with its own /proc, inside a new user namespace
// (uid and gid mapped to themselves) when this process lacks HasPidPrivilege(). *code is body's result,
// returned as soon as body returns; pid 1 stays behind to reap the namespace's orphans until it is empty.
// An error (namespaces refused, e.g. user namespaces disabled) means nothing ran: the caller goes on here.
// on_interrupt: called whenever a signal interrupts this process's wait for the namespace's report
// (revive restart serves --checkpoint-signal with it).
Status RunInPidNamespace(const std::function<int()>& body, int* code, void (*on_interrupt)() = nullptr);
// Whether that namespace also gets an IPC namespace of its own (the images hold SysV segments, whose ids
// only an IPC namespace we own lets us choose; WantsPidNamespace sets it).
void SetIpcNamespace(bool on);

}  // namespace revive::proctree

namespace revive::proctree {

// What `revive restart` calls: starts one restorer per image, as the recorded process tree when the
// images carry proctree sections (pids recreated; a lone process falls back to a new pid when its own is
// taken or pids cannot be chosen, with a warning), else each as a plain child of the caller.
// exec_image(i) runs in the new process and must not return. *waited gets the caller's children and
// *which the image index of each (the tree's roots; the others are reaped by their restored parents).
// *below (if given) gets the others: the processes below the roots, whose restorers are not the caller's
// children (`revive restart` watches them with pidfds: one that dies before it is back ends the restart).
Status StartRestorers(const std::vector<std::string>& images, const std::function<void(size_t)>& exec_image,
                      std::vector<pid_t>* waited, std::vector<size_t>* which,
                      std::vector<TreeMember>* below = nullptr);

}  // namespace revive::proctree
