// What revive asks of Slurm itself (docs/slurm.md): whether it runs inside a job, and putting that job
// back in the queue so the next run restarts from the newest checkpoint.
#pragma once

#include "core/status.h"

namespace revive::cli {

// SLURM_JOB_ID is set (a batch script, a step, or salloc's shell).
bool InSlurmJob();

// `scontrol requeue $SLURM_JOB_ID`, run directly (fork/exec, no shell). The job's processes are ended by
// Slurm afterwards; a requeued batch job starts its script again when it is scheduled. Errors carry
// scontrol's exit status and what it printed on stderr.
Status SlurmRequeue();

}  // namespace revive::cli
