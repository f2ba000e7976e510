// signal plugin: dispositions of signals 1..64 (handler, flags, mask, restorer; all but SIGKILL, SIGSTOP
// and the checkpoint signal, which the engine owns) and process-wide pending signals. Per-thread masks are
// the engine's (it saves them with each thread).
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"
#include "plugins/plugins.h"
#include "plugins/signal/ksig.h"
#include "plugins/signal/signal_wrappers.h"
#include "plugins/vpid/vpid.h"

namespace revive::plugins {
namespace {

constexpr char kTag[] = "RVSG";

// Signals taken off the pending queue by save(), raised again by resume() or restore(). Static: save runs
// with user threads suspended (no malloc) and only on the checkpoint thread.
constexpr int kMaxPending = 256;
siginfo_t g_pending[kMaxPending];
int g_npending;

bool skipped(int sig, int ckpt) { return sig == SIGKILL || sig == SIGSTOP || sig == ckpt; }

// Dequeues every pending signal the checkpoint thread can see (its own and the process-wide ones), so
// that they are in the image; real-time signals keep every queued instance, in order.
void collect_pending(int ckpt) {
  g_npending = 0;
  uint64_t pend = ksigpending();
  for (int sig = 1; sig <= kMaxSig; ++sig) {
    if (!(pend & sigbit(sig)) || skipped(sig, ckpt)) continue;
    while (g_npending < kMaxPending && ktake(sig, &g_pending[g_npending])) ++g_npending;
  }
  if (g_npending == kMaxPending) warn("more than 256 pending signals: the rest stay pending but are not in the image");
}

int raise_pending(const siginfo_t* list, int n, char* msg, size_t cap) {
  for (int k = 0; k < n; ++k) {
    // The image holds the sender as the program saw it (save): the kernel's id of it now goes back.
    siginfo_t info = list[k];
    vpid::real_siginfo(&info);
    if (kqueue_self(info) != 0) {
      int e = errno;
      char line[120];
      Msg m(line, sizeof line);
      m.s("cannot raise pending signal ").i(list[k].si_signo).s(" again: ").err(e);
      if (!msg) {
        warn(line);
        continue;
      }
      return fail(msg, cap, m, e);
    }
  }
  return 0;
}

int init() {
  inject::set_cut_fixup(&signal_entry_cut_fixup);
  return signal_wrappers_init();
}

int save(inject::SectionWriter& w) {
  int ckpt = ckpt_sig();
  Out out(w);
  out.tag(kTag);
  uint32_t n = 0;
  for (int sig = 1; sig <= kMaxSig; ++sig) n += skipped(sig, ckpt) ? 0 : 1;
  out.u32(n);
  for (int sig = 1; sig <= kMaxSig; ++sig) {
    if (skipped(sig, ckpt)) continue;
    KSigaction act{};
    if (ksigaction(sig, nullptr, &act) != 0) return -errno;
    to_program_view(sig, &act);  // the image holds the program's handler, not the trampoline
    out.u32(static_cast<uint32_t>(sig));
    out.bytes(&act, sizeof act);
  }
  collect_pending(ckpt);
  // Senders as the program sees them: after a restart with other kernel pids, the old kernel id would
  // name nobody (or another process) in the restored computation's table.
  for (int k = 0; k < g_npending; ++k) vpid::virtual_siginfo(&g_pending[k]);
  out.u32(static_cast<uint32_t>(g_npending));
  out.bytes(g_pending, sizeof(siginfo_t) * static_cast<size_t>(g_npending));
  if (!out.ok()) {
    raise_pending(g_pending, g_npending, nullptr, 0);
    g_npending = 0;
    return -ENOMEM;
  }
  return 0;
}

void resume(bool) {
  raise_pending(g_pending, g_npending, nullptr, 0);
  g_npending = 0;
}

int restore(inject::SectionReader& r, char* msg, size_t cap) {
  char line[160];
  In in(r);
  if (!in.tag(kTag)) return fail(msg, cap, Msg(line, sizeof line).s("signal section: bad tag (not a signal section)"), EINVAL);
  uint32_t n = in.u32();
  if (!in.ok() || n > kMaxSig) return fail(msg, cap, Msg(line, sizeof line).s("signal section: bad count ").u(n), EINVAL);
  int ckpt = ckpt_sig();
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t sig = in.u32();
    KSigaction act{};
    in.bytes(&act, sizeof act);
    if (!in.ok()) return fail(msg, cap, Msg(line, sizeof line).s("signal section: truncated at disposition ").u(k), EINVAL);
    if (sig < 1 || sig > kMaxSig || sig == SIGKILL || sig == SIGSTOP)
      return fail(msg, cap, Msg(line, sizeof line).s("signal section: bad signal number ").u(sig), EINVAL);
    if (static_cast<int>(sig) == ckpt) continue;  // REVIVE_SIGNAL changed: the engine's signal wins
    to_kernel_view(static_cast<int>(sig), &act);  // a handler goes back behind the counting trampoline
    if (ksigaction(static_cast<int>(sig), &act, nullptr) != 0) {
      int e = errno;
      return fail(msg, cap, Msg(line, sizeof line).s("signal ").u(sig).s(": cannot restore its disposition: ").err(e), e);
    }
  }
  uint32_t np = in.u32();
  if (!in.ok() || np > kMaxPending || np * sizeof(siginfo_t) != in.remaining())
    return fail(msg, cap, Msg(line, sizeof line).s("signal section: bad pending-signal list"), EINVAL);
  // Read one at a time onto the stack: restore may not allocate, and g_pending belongs to the image.
  for (uint32_t k = 0; k < np; ++k) {
    siginfo_t info;
    in.bytes(&info, sizeof info);
    if (!in.ok() || info.si_signo < 1 || info.si_signo > kMaxSig)
      return fail(msg, cap, Msg(line, sizeof line).s("signal section: bad pending signal ").u(k), EINVAL);
    int rc = raise_pending(&info, 1, msg, cap);
    if (rc != 0) return rc;
  }
  g_npending = 0;  // memory came back from the image as save() left it
  return 0;
}

}  // namespace
}  // namespace revive::plugins

namespace revive::inject {
const Plugin kSignalPlugin = {"signal", 1, plugins::init, plugins::save, plugins::resume, plugins::restore, nullptr, nullptr, nullptr, nullptr};
}
