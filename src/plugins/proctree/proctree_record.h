// Section "proctree" (version 1): who this process is in its process tree, and its children that have
// already exited (zombies) with their wait status. Read by the proctree plugin (checks it on restore)
// and by `revive restart` (tree_plan.cpp), which recreates the tree before any process is restored.
//
// Layout (native-endian, as every plugin section):
//   "RVPT" u32 pid u32 ppid u32 pgid u32 sid u32 nzombies { u32 pid, u32 wait_status }[nzombies]
// Live children are not listed: each is a process of the computation with its own image naming its
// ppid. A zombie has no image (it exited), so its parent's section carries what waitpid must return.
#pragma once

#include <stdint.h>

namespace revive::proctree {

constexpr char kTag[] = "RVPT";
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxZombies = 4096;

struct Zombie {
  uint32_t pid;
  uint32_t status;  // as waitpid() reports it (WIFEXITED/WIFSIGNALED encoding)
};

}  // namespace revive::proctree
