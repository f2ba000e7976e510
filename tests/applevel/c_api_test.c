/* The C API from a C program: write, restart in a new handle, errors as return codes + messages. */
#include <revive/checkpoint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              revive_last_error());                                              \
      failures++;                                                                \
    }                                                                            \
  } while (0)

struct pod {
  int a;
  double b;
};

/* The data of checkpoint "capi", one variable per C type. */
static int n;
static int64_t big;
static float f[3];
static double d[4];
static double z[2];
static char name[16];
static struct pod p;

static revive_cp* open_capi(const char* base) {
  revive_cp* cp = revive_cp_create_at("capi", base);
  CHECK(cp != NULL);
  CHECK(revive_cp_add_int(cp, "n", &n, 1) == 0);
  CHECK(revive_cp_add_int64(cp, "big", &big, 1) == 0);
  CHECK(revive_cp_add_float(cp, "f", f, 3) == 0);
  CHECK(revive_cp_add_double(cp, "d", d, 4) == 0);
  CHECK(revive_cp_add_complex_double(cp, "z", z, 1) == 0);
  CHECK(revive_cp_add_char(cp, "name", name, sizeof name) == 0);
  CHECK(revive_cp_add_bytes(cp, "pod", &p, sizeof p) == 0);
  return cp;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s BASE_DIR\n", argv[0]);
    return 2;
  }
  const char* base = argv[1];

  /* First run: fresh start, write at iterations 0, 5, 10. */
  revive_cp* cp = open_capi(base);
  CHECK(revive_cp_add_int(cp, "n", &n, 1) == -1); /* duplicate */
  CHECK(strstr(revive_last_error(), "twice") != NULL);
  CHECK(revive_cp_commit(cp) == 0);
  CHECK(revive_cp_add_int(cp, "late", &n, 1) == -1);
  CHECK(strstr(revive_last_error(), "late") != NULL && strstr(revive_last_error(), "after commit") != NULL);
  int64_t it = 0;
  CHECK(revive_cp_restart_if_needed(cp, &it) == 0);
  for (it = 0; it <= 12; ++it) {
    n = (int)it;
    big = it * 1000000000LL;
    f[2] = (float)it;
    d[3] = it * 0.5;
    z[0] = (double)it;
    z[1] = -(double)it;
    snprintf(name, sizeof name, "it%d", (int)it);
    p.a = (int)it;
    p.b = it * 2.0;
    int r = revive_cp_update_and_write(cp, it, 5);
    CHECK(r == (it % 5 == 0 ? 1 : 0));
  }
  CHECK(revive_cp_wait(cp) == 0);
  CHECK(revive_cp_version(cp) == 3);
  revive_cp_destroy(cp);

  /* Second run: restart reads iteration 10's data. */
  n = -1;
  memset(d, 0, sizeof d);
  memset(&p, 0, sizeof p);
  memset(name, 0, sizeof name);
  cp = open_capi(base);
  CHECK(revive_cp_commit(cp) == 0);
  it = 0;
  CHECK(revive_cp_restart_if_needed(cp, &it) == 1);
  CHECK(it == 11);
  CHECK(n == 10 && big == 10000000000LL && f[2] == 10.0f && d[3] == 5.0 && z[0] == 10.0 && z[1] == -10.0);
  CHECK(strcmp(name, "it10") == 0);
  CHECK(p.a == 10 && p.b == 20.0);
  CHECK(revive_cp_version(cp) == 3);
  CHECK(revive_cp_write(cp, 11) == 0);
  CHECK(revive_cp_version(cp) == 4);
  revive_cp_destroy(cp);

  /* Wrong type on restart: an error code and a message naming the key. */
  int right = 4;
  double wrong = 0;
  cp = revive_cp_create_at("capi3", base);
  CHECK(revive_cp_add_int(cp, "n", &right, 1) == 0);
  CHECK(revive_cp_commit(cp) == 0);
  CHECK(revive_cp_write(cp, 0) == 0);
  revive_cp_destroy(cp);
  cp = revive_cp_create_at("capi3", base);
  CHECK(revive_cp_add_double(cp, "n", &wrong, 1) == 0);
  CHECK(revive_cp_commit(cp) == 0);
  CHECK(revive_cp_restart_if_needed(cp, NULL) == -1);
  CHECK(strstr(revive_last_error(), "'n'") != NULL && strstr(revive_last_error(), "stored as int32") != NULL);
  revive_cp_destroy(cp);
  /* Asking for a missing key is an error too, not a partial read. */
  cp = revive_cp_create_at("capi", base);
  CHECK(revive_cp_add_int(cp, "n", &n, 1) == 0);
  CHECK(revive_cp_commit(cp) == 0);
  CHECK(revive_cp_restart_if_needed(cp, NULL) == -1);
  CHECK(strstr(revive_last_error(), "did not add") != NULL);
  revive_cp_destroy(cp);

  /* Programmatic options: async zero-copy with keep=1, update() + write(). */
  revive_options o;
  CHECK(revive_options_from_env(&o) == 0);
  CHECK(o.keep == 2 && o.read_on_restart == 1 && o.async_thread_cpu == -1);
  CHECK(o.interval == 0 && o.mtbf == 0 && o.heartbeat_dir[0] == '\0');
  /* interval -1 = auto, which needs the MTBF. */
  snprintf(o.base_path, sizeof o.base_path, "%s/auto", base);
  o.interval = -1;
  CHECK(revive_cp_create_with("auto", &o) == NULL);
  CHECK(strstr(revive_last_error(), "REVIVE_MTBF") != NULL);
  o.mtbf = 3600;
  snprintf(o.heartbeat_dir, sizeof o.heartbeat_dir, "%s/hb", base);
  revive_cp* ca = revive_cp_create_with("auto", &o);
  CHECK(ca != NULL);
  CHECK(revive_cp_add_int(ca, "n", &n, 1) == 0);
  CHECK(revive_cp_commit(ca) == 0);
  CHECK(revive_cp_update_and_write(ca, 0, 1) == 1);
  revive_cp_destroy(ca);
  char path0[8192];
  snprintf(path0, sizeof path0, "%s/hb/rank.0", base);
  FILE* hb = fopen(path0, "r");
  CHECK(hb != NULL); /* the heartbeat file exists */
  if (hb) fclose(hb);
  o.interval = 0;
  o.mtbf = 0;
  o.heartbeat_dir[0] = '\0';
  snprintf(o.base_path, sizeof o.base_path, "%s/opts", base);
  o.keep = 1;
  o.zero_copy = 1;
  o.compress = 1;
  int v = 5;
  revive_cp* c3 = revive_cp_create_with("withopts", &o);
  CHECK(c3 != NULL);
  CHECK(revive_cp_add_int(c3, "v", &v, 1) == 0);
  CHECK(revive_cp_commit(c3) == 0);
  CHECK(revive_cp_update(c3) == 0);
  CHECK(revive_cp_write(c3, 1) == 0);
  CHECK(revive_cp_wait(c3) == 0);
  CHECK(revive_cp_write(c3, 2) == 0);
  CHECK(revive_cp_wait(c3) == 0);
  revive_cp_destroy(c3);
  char path[8192];
  snprintf(path, sizeof path, "%s/opts/withopts/v-1", base);
  FILE* gone = fopen(path, "r");
  CHECK(gone == NULL); /* keep=1 removed version 1 */
  if (gone) fclose(gone);
  o.keep = 0;
  CHECK(revive_cp_create_with("withopts", &o) == NULL);
  CHECK(strstr(revive_last_error(), "keep") != NULL);

  /* Bad arguments. */
  CHECK(revive_cp_create_at("bad/name", base) == NULL);
  CHECK(strstr(revive_last_error(), "bad/name") != NULL);
  CHECK(revive_cp_commit(NULL) == -1);
  CHECK(revive_cp_version(NULL) == 0);
  revive_cp* c2 = revive_cp_create_at("capi2", base);
  CHECK(revive_cp_add_int(c2, "x", NULL, 3) == -1);
  CHECK(strstr(revive_last_error(), "null data") != NULL);
  revive_cp_destroy(c2);

  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("c api: all checks passed\n");
  return failures ? 1 : 0;
}
