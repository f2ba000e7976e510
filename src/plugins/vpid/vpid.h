// Virtual process and thread ids (docs/process-trees.md "Virtual pids"). After a restart that could not
// recreate pids (no CAP_SYS_ADMIN, no user namespace), every process keeps seeing the ids it had through
// the wrappers in this folder; the mapping lives in the shared table (vpid_table.h). With no table mapped
// (launch, exact-pid restart) every wrapper passes straight through: one load and a branch.
#pragma once

#include <dirent.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "plugins/vpid/vpid_table.h"

namespace revive::vpid {

extern Table g_table;   // h == nullptr: inactive
extern pid_t g_vpid;    // this process's virtual pid while active

inline bool active() { return __builtin_expect(__atomic_load_n(&g_table.h, __ATOMIC_RELAXED) != nullptr, 0); }

// A pid/tid the program names -> the kernel's. Identity for ids the table does not know; an id that is
// only some other process's real id (never one of the computation's ids) becomes a pid no process has,
// so the call fails as natively (ESRCH, ECHILD).
pid_t to_real(pid_t v);
// Whether a process just given kernel pid `real` by fork will use it as its virtual id too (no stale entry
// for it, no process of the computation has it as its id). Fresh ids lie above any kernel pid, so once
// true this stays true: the parent may return `real` without waiting for the child to register.
bool keeps_kernel_id(pid_t real);
// A kernel id -> the program's. Identity for ids the table does not know.
pid_t to_virt(pid_t r);
// For process-group arguments: 0 and -1 stay, -g becomes -to_real(g).
inline pid_t to_real_signed(pid_t v) { return v < -1 ? -to_real(-v) : v > 0 ? to_real(v) : v; }
// The calling thread's virtual tid (cached per thread; registered on first use).
pid_t self_tid();
// Changes whenever a table is mapped or forgotten: a call that blocked across a checkpoint and resumed in
// a restored process sees a different value after it than before.
uint32_t epoch();
// A call that only asks (getppid, getpgid, kill(pid, 0), SO_PEERCRED...), made by `ask` with its ids
// translated both ways, is made again when a restore came in between. A checkpoint's signal reaches a
// thread as the kernel returns from a system call, so a busy thread is most often cut right after such a
// call returned a kernel id (or while it translates one): restored, it would read the old incarnation's
// kernel id with the new table (vpid.idspin; vpid.chain's "A: ... exit 101"). Asking again is harmless
// because the call changes nothing; calls that act keep the old answer (process-trees.md).
template <typename Ask>
inline auto asked(Ask ask) {
  for (;;) {
    const uint32_t ep = epoch();
    auto r = ask();
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  // the translation is done before the epoch is read again
    if (__builtin_expect(epoch() == ep, 1)) return r;
  }
}
// The sender's pid in a signal's siginfo (kill, sigqueue, tgkill, SIGCHLD's child) as the program knows
// it. For the signal plugin's trampoline and its sigwaitinfo/sigtimedwait wrappers; async-signal-safe.
void virtual_siginfo(siginfo_t* info);
// The same for one sender pid of a signal (signo, si_code), e.g. a signalfd's ssi_pid.
pid_t virtual_sender(int signo, int code, pid_t pid);
// The same, for a sender the kernel named in incarnation `ep` (to_virt_since).
pid_t virtual_sender_since(int signo, int code, pid_t pid, uint32_t ep);
// A checkpoint's signal reaches a thread as the kernel returns from a system call: a wrapper that got a
// kernel id from it (a sigtimedwait's sender) may translate it only after a restart, in another
// incarnation's ids. The checkpoint thread keeps this incarnation's map in the image, once per
// checkpoint (remember_incarnation); to_virt_since translates an id the kernel gave while epoch() was
// `ep` with the map of that incarnation. For calls the kernel never restarts (sigtimedwait,
// sigwaitinfo: EINTR, asked again by the wrapper with a new `ep`); a restartable call's result may come
// from either incarnation.
void remember_incarnation();
pid_t to_virt_since(pid_t real, uint32_t ep);
void virtual_siginfo_since(siginfo_t* info, uint32_t ep);
// For calls the kernel restarts (wait4, waitid, a signalfd read): taken right before the call, then
// answered_in() says which incarnation's kernel ids its result holds. If a restore came between, the
// result is the new incarnation's when the checkpoint found the thread at the `syscall` instruction
// (the kernel had turned the blocked call back to be made again, or it was about to be made), else the
// old one's: the call had returned and the thread was saved before translating.
struct CallStart {
  uint32_t ep;
  uint32_t cuts;
  uint32_t depth;  // the program's signal-handler depth the call was made at (inject::program_handler_depth)
};
CallStart call_start();
uint32_t answered_in(CallStart c);
// A child the program reaped: its entry leaves the table. `ep` as for to_virt_since.
void reaped_since(pid_t real, uint32_t ep);
// The reverse, for a siginfo the program's view was saved in (a pending signal in an image): its sender
// as the kernel names it now, so that virtual_siginfo gives the program the id it had.
void real_siginfo(siginfo_t* info);
// waitid with the raw system call's rusage argument (the syscall() wrapper), as the waitid wrapper.
int waitid_rusage(idtype_t idtype, id_t id, siginfo_t* info, int options, struct rusage* ru);
// /proc/.../stat and status with the program's ids (vpid_procview.cpp): for an open of `path` (the
// program's; `real_path` the kernel's) with `flags`, a sealed read-only memfd holding the rewritten text,
// -1 with errno, or kNotAView when the path, the flags or the contents are not for it (open as usual).
constexpr int kNotAView = -2;
int proc_view(const char* path, const char* real_path, int flags);
// For the fd plugin: the /proc path such a memfd stands for, from its /proc/self/fd link
// ("/memfd:revive-proc:<path> (deleted)"), else nullptr.
const char* proc_view_path(const char* link);
// opendir of `path` (the program's) gave d: a /proc/<pid>/task listing is marked, so that readdir gives
// its entries the program's tids (vpid_taskdir.cpp).
void dir_opened(const char* path, DIR* d);

// Library load (also in an exec'ed image): maps REVIVE_VPID_TABLE if set. A table that cannot be used
// ends the process with a message naming the file (its ids would be wrong).
void init();
// Restored process, user threads held (raw syscalls only): maps the table `path` (nullptr/"": none, the
// restart recreated the pids) and registers the restored threads. 0 or -errno with a message in msg.
int restore(const char* path, char* msg, size_t cap);
// Engine: every thread in the checkpoint handler, before its context is saved, records its virtual
// tid in its TLS; a restored thread then registers (that tid, its new tid) for restore() to publish.
void thread_checkpoint();
void thread_restored();
// Fork child (before it tells its parent it is in): registers its pid (a fresh virtual id if its
// kernel pid equals a virtual id in use) and resets the cached ids.
void after_fork_child();
// For the fork wrappers, in the parent when keeps_kernel_id(pid) was false (rare: the table names the
// child's kernel pid): the id the child took, read from its memory once it has registered (it does so
// first thing after fork). Waits meanwhile; a child that died first gives to_virt(pid).
pid_t child_id(pid_t real);
// Whether child_id can read our children (Yama ptrace_scope <= 1); otherwise the fork wrappers use the
// eager join, where the child registers before fork returns.
bool may_read_children();
// The table's mapping [lo, hi) (0, 0 when none): the engine does not save it in images.
void mapping(uint64_t* lo, uint64_t* hi);
// Path of the mapped table ("" when none), for the environment of exec'ed programs.
const char* table_path();

}  // namespace revive::vpid
