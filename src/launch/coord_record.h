// Which coordinator serves a checkpoint directory, so that `revive status` can tell "the coordinator was
// lost" (killed, its host gone) from "no computation was ever started here". The coordinator writes
// <ckpt-dir>/.revive-coord-<port> once it listens and removes it when it exits normally; a record whose
// process is gone means the coordinator died. Its processes run on without checkpoints.
#pragma once

#include <string>

#include "core/status.h"

namespace revive::launch {

std::string CoordRecordPath(const std::string& ckpt_dir, unsigned port);

// Best effort: a coordinator must not fail to start because its directory is read-only.
// parent: HOST:PORT of the root for a host's sub-coordinator, "" for a root.
void WriteCoordRecord(const std::string& ckpt_dir, unsigned port, const std::string& bind,
                      const std::string& parent);
void RemoveCoordRecord(const std::string& ckpt_dir, unsigned port);

// The port of the newest root coordinator whose record in ckpt_dir names a live process on this host; 0
// if there is none (no record, or every one is stale). Sub-coordinators of --hosts are not roots.
unsigned LiveCoordPort(const std::string& ckpt_dir);

// When nothing answers on the port: a sentence saying the coordinator is lost (naming its pid, host and
// start time) if a record shows one was running and did not shut down; "" if there is no such record.
std::string DescribeLostCoordinator(const std::string& ckpt_dir, unsigned port);

}  // namespace revive::launch
