/* masterworker ROUNDS SLEEP_US TASKS_PER_ROUND: a data-dependent communication pattern under
 * checkpoint/restart (issue 7). Rank 0 hands tasks out to whichever worker asks first (MPI_ANY_SOURCE,
 * and MPI_ANY_TAG for the kind of message); a task takes a time that depends on its id (about SLEEP_US
 * on average), so which worker runs which task, and the order the results arrive in, vary from run to
 * run. Tasks whose id is a multiple of 5 send a note (another tag) before their result. The master files
 * each result under its task id, so the digest line it prints per round is the same whatever the order.
 * At the end of a round every worker is told to wait for the next. Needs 2+ ranks. */
#include "common.h"

enum { TAG_NOTE = 1, TAG_RESULT = 2, TAG_TASK = 3, TAG_ROUND_END = 4, TAG_STOP = 5 };

static uint64_t value(long task) {
  uint64_t x = (uint64_t)task;
  for (int k = 0; k < 1000; k++) x = mix64(x + k);
  return x;
}
static uint64_t work(long task, long sleep_us) {
  uint64_t x = value(task);
  usleep((useconds_t)(sleep_us / 2 + (long)(mix64(task) % (uint64_t)(sleep_us + 1))));
  return x;
}

int main(int argc, char **argv) {
  int rank, size;
  start(&argc, &argv, &rank, &size);
  long rounds = arg_long(argc, argv, 1, 20), sleep_us = arg_long(argc, argv, 2, 60000);
  long per = arg_long(argc, argv, 3, 12);
  CHECK(size >= 2, "masterworker needs at least 2 ranks");
  uint64_t total = FNV0;
  if (rank == 0) {
    uint64_t *res = malloc(8 * per);
    int *done_by = calloc(size, sizeof(int));
    for (long r = 0; r < rounds; r++) {
      long next = 0, got = 0, notes = 0;
      int idle = 0;
      for (long k = 0; k < per; k++) res[k] = 0;
      /* Every worker gets a first task (or the end of the round), then whoever answers first the next. */
      for (int w = 1; w < size; w++) {
        if (next < per) {
          uint64_t t = (uint64_t)(r * per + next++);
          MPI_Send(&t, 1, MPI_UINT64_T, w, TAG_TASK, MPI_COMM_WORLD);
        } else {
          MPI_Send(NULL, 0, MPI_UINT64_T, w, r + 1 < rounds ? TAG_ROUND_END : TAG_STOP, MPI_COMM_WORLD);
          idle++;
        }
      }
      while (idle < size - 1) {
        /* A RESULT {task, value}, or a NOTE {task, 0} that some tasks send before their result. */
        uint64_t msg[2];
        MPI_Status st;
        MPI_Recv(msg, 2, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        long t = (long)(msg[0] - (uint64_t)r * per);
        CHECK(t >= 0 && t < per, "a message about no task of this round");
        if (st.MPI_TAG == TAG_NOTE) {
          CHECK(msg[0] % 5 == 0 && res[t] == 0, "a note for the wrong task or after its result");
          notes++;
          continue;
        }
        CHECK(st.MPI_TAG == TAG_RESULT, "unexpected tag");
        CHECK(res[t] == 0, "a result twice");
        res[t] = msg[1];
        got++;
        done_by[st.MPI_SOURCE]++;
        if (next < per) {
          uint64_t nt = (uint64_t)(r * per + next++);
          MPI_Send(&nt, 1, MPI_UINT64_T, st.MPI_SOURCE, TAG_TASK, MPI_COMM_WORLD);
        } else {
          MPI_Send(NULL, 0, MPI_UINT64_T, st.MPI_SOURCE, r + 1 < rounds ? TAG_ROUND_END : TAG_STOP, MPI_COMM_WORLD);
          idle++;
        }
      }
      CHECK(got == per, "results missing");
      uint64_t h = fnv64(fnv64(FNV0, r), (uint64_t)notes);
      for (long k = 0; k < per; k++) {
        CHECK(res[k] == value(r * per + k), "a wrong result");
        h = fnv64(h, res[k]);
      }
      printf("masterworker round %ld notes %ld %016llx\n", r, notes, (unsigned long long)h);
      fflush(stdout);
      total = fnv64(total, h);
    }
    /* Which worker did how much varies: stderr only. */
    for (int w = 1; w < size; w++) fprintf(stderr, "worker %d ran %d tasks\n", w, done_by[w]);
    printf("masterworker done %ld rounds total %016llx\n", rounds, (unsigned long long)total);
    fflush(stdout);
  } else {
    for (;;) {
      uint64_t t;
      MPI_Status st;
      MPI_Recv(&t, 1, MPI_UINT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      if (st.MPI_TAG == TAG_ROUND_END) continue;
      if (st.MPI_TAG == TAG_STOP) break;
      CHECK(st.MPI_TAG == TAG_TASK, "a worker got an unexpected tag");
      if (t % 5 == 0) {
        uint64_t note[2] = {t, 0};
        MPI_Send(note, 2, MPI_UINT64_T, 0, TAG_NOTE, MPI_COMM_WORLD);
      }
      uint64_t msg[2] = {t, work((long)t, sleep_us)};
      MPI_Send(msg, 2, MPI_UINT64_T, 0, TAG_RESULT, MPI_COMM_WORLD);
    }
  }
  finish();
  return 0;
}
