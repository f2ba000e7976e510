// Slurm's compressed node lists (SLURM_JOB_NODELIST): `n[1-3,7],gpu05`, zero padded `n[001-003]`, several
// bracket groups `r[1-2]n[1-2]` (their product, the first group outermost, as Slurm expands it). Parsed
// here rather than by `scontrol show hostnames` so `--hosts slurm` works without Slurm's commands on the
// PATH and fails with a message that names the list.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace revive::launch {

// Expands `list` into host names, in Slurm's order. Errors (unbalanced or nested brackets, an empty
// entry or range, a range whose end is below its start, non-digits in a range, more than `max_hosts`
// names, a name outside [A-Za-z0-9._-]) name the list and the entry.
Status ExpandSlurmHostList(const std::string& list, std::vector<std::string>* hosts, size_t max_hosts = 65536);

}  // namespace revive::launch
