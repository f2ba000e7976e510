// `revive restart`'s entry point into process trees: plan, check, spawn, or fall back to independent
// processes for images without a proctree section.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>

#include "plugins/proctree/tree.h"

namespace revive::proctree {
namespace {

Status SpawnFlat(size_t n, const std::function<void(size_t)>& exec_image, std::vector<pid_t>* waited,
                 std::vector<size_t>* which) {
  for (size_t i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) return Status::FromErrno("fork", errno);
    if (pid == 0) {
      exec_image(i);
      _exit(127);
    }
    waited->push_back(pid);
    which->push_back(i);
  }
  return Status::OK();
}

// Virtual pids: the tree with new pids, each process told its recorded one through the shared table.
Status SpawnVirtual(const TreePlan& plan, const std::function<void(size_t)>& exec_image, std::vector<pid_t>* roots,
                    std::vector<TreeMember>* below) {
  static VpidTable table;  // mapped until we exit (the processes of the skeleton inherit the mapping)
  Status s = CreateVpidTable(&table);
  if (!s.ok()) return s;
  setenv(vpid::kEnv, table.path.c_str(), 1);  // inherited by every restorer, handed to its engine
  s = SpawnTree(plan, false, exec_image, roots, &table.table, below);
  unsetenv(vpid::kEnv);
  return s;
}

// A recorded pid no kernel can give (a fresh virtual id, vpid_table.h): only virtual pids restore it.
bool HasFreshIds(const TreePlan& plan) {
  for (const TreeProc& t : plan.procs) {
    if (t.pid >= vpid::kFreshBase) return true;
    for (const Zombie& z : t.zombies)
      if (z.pid >= vpid::kFreshBase) return true;
  }
  return false;
}

}  // namespace

bool WantsPidNamespace(const std::vector<std::string>& images, std::string* why) {
  const char* env = getenv("REVIVE_PIDNS");
  if (env && strcmp(env, "0") == 0) return false;
  TreePlan plan;
  if (!PlanTree(images, &plan).ok()) return false;  // no recorded pids (or a bad image: reported later)
  SetIpcNamespace(std::any_of(plan.shm.begin(), plan.shm.end(),
                              [](const ShmObject& o) { return o.rec.kind == image::kShmSysV; }));
  // Virtual pids asked for, or ids no pid namespace can give (fresh virtual ids of a virtual restart).
  if (WantVirtualPids() || HasFreshIds(plan)) return false;
  if (env && strcmp(env, "1") == 0) {
    *why = "REVIVE_PIDNS=1";
    return true;
  }
  if (!HasPidPrivilege()) {
    *why = "recreating pids needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE here";
    return true;
  }
  // A thread's tid taken counts as a pid taken: staying here would give that thread a new gettid().
  Status s = CheckPidsFree(plan);
  if (s.ok()) s = CheckTidsFree(plan);
  if (s.ok()) return false;
  *why = s.message();
  return true;
}

Status StartRestorers(const std::vector<std::string>& images, const std::function<void(size_t)>& exec_image,
                      std::vector<pid_t>* waited, std::vector<size_t>* which, std::vector<TreeMember>* below) {
  TreePlan plan;
  Status s = PlanTree(images, &plan);
  if (s.IsNotFound()) return SpawnFlat(images.size(), exec_image, waited, which);
  if (!s.ok()) return s;
  std::vector<pid_t> roots;
  auto take_roots = [&] {
    for (size_t k = 0; k < roots.size(); ++k) {
      waited->push_back(roots[k]);
      which->push_back(size_t(plan.roots[k]));
    }
  };
  // Pids that cannot be chosen here (docs/process-trees.md "Virtual pids"): new pids, old ids seen.
  if (WantVirtualPids() || !HasPidPrivilege() || HasFreshIds(plan)) {
    s = SpawnVirtual(plan, exec_image, &roots, below);
    take_roots();
    return s;
  }
  // A pid that was free when the restart chose to stay in this pid namespace (WantsPidNamespace) can be
  // taken by now: by a process of another restart started at the same moment (two copies of one
  // checkpoint side by side), or by anything else of the machine. The tree then comes back with new
  // pids, its old ids seen through the virtual-pid table, as a lone process whose pid is taken does.
  // Unless the user said REVIVE_PIDNS=0 (the exact pids or nothing): then a tree is refused, naming the pid.
  const char* ns = getenv("REVIVE_PIDNS");
  const bool exact_only = ns && strcmp(ns, "0") == 0 && NeedsTree(plan);
  s = CheckPidsFree(plan);
  if (!s.ok()) {
    if (exact_only) return s;
    fprintf(stderr, "revive restart: warning: %s; restoring with new pids, the old ones kept as virtual ids\n",
            s.message().c_str());
    s = SpawnVirtual(plan, exec_image, &roots, below);
    take_roots();
    return s;
  }
  // A thread's tid taken (REVIVE_PIDNS=0, or taken since WantsPidNamespace looked): the restart goes on,
  // that thread gets a new id; said, naming the tid and the image.
  if (Status t = CheckTidsFree(plan); !t.ok())
    fprintf(stderr, "revive restart: warning: %s; that thread comes back with a new tid\n", t.message().c_str());
  s = SpawnTree(plan, true, exec_image, &roots, nullptr, below);
  // The kernel refused to choose pids (EPERM: no privilege over this pid namespace; ENOSYS: clone3
  // filtered out, as where user namespaces are disabled by seccomp; EEXIST: a pid was taken between the
  // check above and clone3, and the half-made tree was taken down): virtual pids.
  if (!s.ok() && roots.empty() && (s.message().find("CAP_SYS_ADMIN") != std::string::npos ||
                                   s.message().find(strerror(ENOSYS)) != std::string::npos ||
                                   (s.IsAlreadyExists() && !exact_only))) {
    if (getenv("REVIVE_LOG") && atoi(getenv("REVIVE_LOG")) >= 1)
      fprintf(stderr, "revive restart: %s; restoring with virtual pids\n", s.message().c_str());
    s = SpawnVirtual(plan, exec_image, &roots, below);
  }
  take_roots();
  return s;
}

}  // namespace revive::proctree
