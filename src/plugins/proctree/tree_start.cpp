// `revive restart`'s entry point into process trees: plan, check, spawn, or fall back to independent
// processes for images without a proctree section.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

}  // namespace

bool WantsPidNamespace(const std::vector<std::string>& images, std::string* why) {
  const char* env = getenv("REVIVE_PIDNS");
  if (env && strcmp(env, "0") == 0) return false;
  TreePlan plan;
  if (!PlanTree(images, &plan).ok()) return false;  // no recorded pids (or a bad image: reported later)
  if (env && strcmp(env, "1") == 0) {
    *why = "REVIVE_PIDNS=1";
    return true;
  }
  if (!HasPidPrivilege()) {
    *why = "recreating pids needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE here";
    return true;
  }
  Status s = CheckPidsFree(plan);
  if (s.ok()) return false;
  *why = s.message();
  return true;
}

Status StartRestorers(const std::vector<std::string>& images, const std::function<void(size_t)>& exec_image,
                      std::vector<pid_t>* waited, std::vector<size_t>* which) {
  TreePlan plan;
  Status s = PlanTree(images, &plan);
  if (s.IsNotFound()) return SpawnFlat(images.size(), exec_image, waited, which);
  if (!s.ok()) return s;
  bool exact = true;
  s = CheckPidsFree(plan);
  if (!s.ok()) {
    if (NeedsTree(plan)) return s;
    fprintf(stderr, "revive restart: warning: %s; restoring with new pids\n", s.message().c_str());
    exact = false;
  }
  std::vector<pid_t> roots;
  s = SpawnTree(plan, exact, exec_image, &roots);
  if (!s.ok() && exact && roots.empty() && !NeedsTree(plan) && s.message().find("CAP_SYS_ADMIN") != std::string::npos) {
    fprintf(stderr, "revive restart: warning: %s; restoring with new pids\n", s.message().c_str());
    s = SpawnTree(plan, false, exec_image, &roots);
  }
  for (size_t k = 0; k < roots.size(); ++k) {
    waited->push_back(roots[k]);
    which->push_back(size_t(plan.roots[k]));
  }
  return s;
}

}  // namespace revive::proctree
