/* Experiment, not a test (issue 11, docs/rma.md "Toward in-job recovery"): can the survivors of a SIGKILLed
 * rank, kept out of blocking MPI calls by a polled MPI_Ibarrier (an "interruptible fence"), form a
 * communicator of their own and spawn a replacement under Open MPI 4.1, which has no ULFM?
 *   mpicc.openmpi -O1 -o /tmp/x/spawn_after_death bench/rma/spawn_after_death.c
 *   EXP_PORT_FILE=/tmp/x/port mpirun --enable-recovery --mca orte_abort_on_non_zero_status 0 \
 *     -x EXP_PORT_FILE -n 4 /tmp/x/spawn_after_death
 * Rank 2 SIGKILLs itself after a barrier. Each step has an alarm: a step still blocked says so and ends. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank;
static const char* step = "start";
static void on_alarm(int s) {
  (void)s;
  char b[256];
  int n = snprintf(b, sizeof b, "rank %d: step '%s' still blocked after its timeout\n", rank, step);
  write(2, b, n);
  _exit(3);
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) {
    MPI_Comm all;
    int one = 1, sum = 0;
    MPI_Intercomm_merge(parent, 1, &all);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all);
    fprintf(stderr, "child: up, merged with the survivors, allreduce = %d\n", sum);
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  signal(SIGALRM, on_alarm);
  MPI_Comm priv;
  MPI_Comm_dup(MPI_COMM_WORLD, &priv);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 2) raise(SIGKILL);
  /* The "interruptible fence": a nonblocking barrier polled with a deadline (the library would poll the
   * failure mesh instead of a clock). */
  MPI_Request req;
  MPI_Ibarrier(priv, &req);
  int done = 0;
  const double t0 = now();
  while (!done && now() - t0 < 2.0) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  fprintf(stderr, "rank %d: ibarrier %s after %.2f s; the thread is out of MPI\n", rank, done ? "COMPLETED" : "not complete",
          now() - t0);
  /* A survivors' communicator without any collective over the world: rank 0 opens a port (published in a
   * file here; the library would send it over the failure mesh), the others join one by one by
   * connect/accept + merge. Survivors: 0, 1, 3. */
  const char* pf = getenv("EXP_PORT_FILE");
  MPI_Comm surv = MPI_COMM_SELF, next;
  char port[MPI_MAX_PORT_NAME] = {0};
  const double tj = now();
  step = "building the survivors' communicator (connect/accept/merge)";
  alarm(15);
  if (rank == 0) {
    MPI_Open_port(MPI_INFO_NULL, port);
    FILE* f = fopen(pf, "w");
    fputs(port, f);
    fclose(f);
  } else {
    for (int i = 0; i < 200 && !port[0]; ++i) {
      FILE* f = fopen(pf, "r");
      if (f) { if (!fgets(port, sizeof port, f)) port[0] = 0; fclose(f); }
      if (!port[0]) usleep(20000);
    }
  }
  int joiners[] = {1, 3};
  for (int j = 0; j < 2; ++j) {
    MPI_Comm inter;
    if (rank == joiners[j]) {
      /* One joiner at a time (the previous one says it is in): accepts are matched in arrival order. */
      char prev[4200];
      snprintf(prev, sizeof prev, "%s.joined%d", pf, j - 1);
      for (int i = 0; i < 500 && j > 0 && access(prev, F_OK) != 0; ++i) usleep(10000);
      MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
      MPI_Intercomm_merge(inter, 1, &next);
      surv = next;
      snprintf(prev, sizeof prev, "%s.joined%d", pf, j);
      fclose(fopen(prev, "w"));
    } else if (surv != MPI_COMM_SELF || rank == 0) {
      MPI_Comm_accept(port, MPI_INFO_NULL, 0, surv, &inter);
      MPI_Intercomm_merge(inter, 0, &next);
      surv = next;
    }
  }
  alarm(0);
  int ssize, srank;
  MPI_Comm_size(surv, &ssize);
  MPI_Comm_rank(surv, &srank);
  fprintf(stderr, "rank %d: survivors' communicator: %d ranks, I am %d (%.2f s)\n", rank, ssize, srank, now() - tj);
  step = "MPI_Comm_spawn of a replacement from the survivors' communicator";
  alarm(15);
  MPI_Comm inter, all;
  const double t1 = now();
  int err = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, surv, &inter, MPI_ERRCODES_IGNORE);
  MPI_Intercomm_merge(inter, 0, &all);
  int asize, sum = 0, one = 1;
  MPI_Comm_size(all, &asize);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all);
  alarm(0);
  fprintf(stderr, "rank %d: spawn %d, merged communicator of %d ranks, allreduce over it = %d (%.2f s)\n", rank, err, asize,
          sum, now() - t1);
  step = "MPI_Comm_split of the world (includes the dead rank)";
  alarm(5);
  MPI_Comm wsplit;
  MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &wsplit);
  alarm(0);
  fprintf(stderr, "rank %d: split returned\n", rank);
  _exit(0);
}
