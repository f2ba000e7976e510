/* <revive/checkpoint.h> — C API of the application-level checkpoint library (for C and Fortran via
 * bind(C)). Same semantics as revive::Checkpoint (see <revive/checkpoint.hpp>, docs/applevel.md).
 *
 * Every function returning int returns 0 on success and -1 on error; revive_last_error() then gives a
 * message naming the checkpoint, key or file and the reason (thread-local, valid until the next call).
 * Registered memory must stay valid for the life of the handle. */
#ifndef REVIVE_CHECKPOINT_H_
#define REVIVE_CHECKPOINT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct revive_cp revive_cp;

/* Every option of revive::Options (docs/applevel.md); booleans are 0/1. */
typedef struct revive_options {
  char base_path[4096]; /* REVIVE_CP_PATH */
  int read_on_restart;  /* REVIVE_READ_ON_RESTART */
  int async;            /* REVIVE_WRITE_ASYNC */
  int zero_copy;        /* REVIVE_WRITE_ASYNC_ZERO_COPY */
  int async_thread_cpu; /* REVIVE_ASYNC_THREAD_CPU, -1 = not pinned */
  int keep;             /* REVIVE_KEEP */
  int compress;         /* REVIVE_COMPRESS */
  int compress_level;   /* REVIVE_COMPRESS_LEVEL */
  int verbose;          /* REVIVE_VERBOSE */
  double interval;      /* REVIVE_CP_INTERVAL: seconds between writes, 0 = off (`every` decides), -1 = auto */
  double mtbf;          /* REVIVE_MTBF: seconds, required with interval = -1 (auto) */
  char heartbeat_dir[4096]; /* REVIVE_HEARTBEAT_DIR, "" = none */
} revive_options;

/* Fills *o with the defaults overridden by the environment. 0, or -1 for a malformed variable. */
int revive_options_from_env(revive_options* o);
/* Serial checkpoint with exactly these options. NULL on error. */
revive_cp* revive_cp_create_with(const char* name, const revive_options* o);

/* Serial checkpoint named `name` with options from the environment. NULL on error. */
revive_cp* revive_cp_create(const char* name);
/* Same, but the checkpoint directory's base is `base_path` instead of REVIVE_CP_PATH (NULL = env). */
revive_cp* revive_cp_create_at(const char* name, const char* base_path);
void revive_cp_destroy(revive_cp* cp);

int revive_cp_add_int(revive_cp* cp, const char* key, int* p, size_t n);
int revive_cp_add_int64(revive_cp* cp, const char* key, int64_t* p, size_t n);
int revive_cp_add_float(revive_cp* cp, const char* key, float* p, size_t n);
int revive_cp_add_double(revive_cp* cp, const char* key, double* p, size_t n);
/* Interleaved (re, im) pairs: n complex numbers = 2n doubles. */
int revive_cp_add_complex_double(revive_cp* cp, const char* key, double* p, size_t n);
int revive_cp_add_char(revive_cp* cp, const char* key, char* p, size_t n);
/* Opaque bytes (structs): size checked on restart. */
int revive_cp_add_bytes(revive_cp* cp, const char* key, void* p, size_t nbytes);
/* Nested checkpoints (see Checkpoint::add_child). */
int revive_cp_add_child(revive_cp* parent, revive_cp* child);

int revive_cp_commit(revive_cp* cp);
/* 1 = a version was read (*iteration set to its iteration + 1; iteration may be NULL), 0 = fresh start,
 * -1 = error. */
int revive_cp_restart_if_needed(revive_cp* cp, int64_t* iteration);
/* 1 = written, 0 = not this iteration, -1 = error. */
int revive_cp_update_and_write(revive_cp* cp, int64_t iteration, int64_t every);
int revive_cp_write(revive_cp* cp, int64_t iteration);
/* Calls update hooks; in async copy mode snapshots the data the next write will store. */
int revive_cp_update(revive_cp* cp);
int revive_cp_wait(revive_cp* cp);
/* Newest version written or read (0 = none); 0 also for a NULL handle. */
uint64_t revive_cp_version(const revive_cp* cp);

const char* revive_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* REVIVE_CHECKPOINT_H_ */
