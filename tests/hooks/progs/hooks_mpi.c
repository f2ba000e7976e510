/* hooks_mpi STEPS: the hooks in an MPI program (a ring; MPI_THREAD_MULTIPLE so that callbacks may call
 * MPI). Rank 0 prints the ring's sums (stdout must equal a run without revive); every rank writes
 * "rank R active=A" and its callbacks' lines to $HOOKS_EVENTS (checked by tests/mpi_transparent/mpi_cr.py
 * --hooks-events). A critical section covers each step's update of local state. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <mpi.h>
#include <revive/hooks.h>

#include "events.h"

static int rank;
static volatile int n_ckpt, n_cont, n_restart;

static void event(const char* fmt, ...) {
  char line[256];
  int n = snprintf(line, sizeof line, "rank %d ", rank);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  events_append(line, (size_t)n);
}

static void on_checkpoint(void* arg) { (void)arg; event("checkpoint n=%d", ++n_ckpt); }
static void on_continue(void* arg) { (void)arg; event("continue n=%d", ++n_cont); }
static void on_restart(void* arg) { (void)arg; event("restart n=%d checkpoints=%d", ++n_restart, n_ckpt); }

int main(int argc, char** argv) {
  int provided = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int steps = argc > 1 ? atoi(argv[1]) : 50;
  event("active=%d", revive_hooks_active());
  revive_register_callback(REVIVE_HOOK_CHECKPOINT, on_checkpoint, NULL);
  revive_register_callback(REVIVE_HOOK_CONTINUE, on_continue, NULL);
  revive_register_callback(REVIVE_HOOK_RESTART, on_restart, NULL);
  long sum = 0, sumsq = 0;
  for (int i = 0; i < steps; ++i) {
    long v = rank + i, got = 0;
    MPI_Sendrecv(&v, 1, MPI_LONG, (rank + 1) % size, 0, &got, 1, MPI_LONG, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* The section covers local state only, updated in two halves 3 ms apart: a checkpoint requested
     * meanwhile waits for its end, so no image holds one half. Around the exchange it could not be: a
     * rank in a section waiting for a message from a rank the checkpoint already holds would wait until
     * the section timeout (docs/hooks.md). */
    revive_critical_begin();
    sum += got;
    usleep(3000);
    sumsq += got * got;
    revive_critical_end();
    if (rank == 0) {
      printf("step %d sum=%ld sumsq=%ld\n", i, sum, sumsq);
      fflush(stdout);
    }
    usleep(17000);
  }
  MPI_Finalize();
  return 0;
}
