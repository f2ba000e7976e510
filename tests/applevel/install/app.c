/* The C API through an installed revive. */
#include <revive/checkpoint.h>
#include <stdio.h>

int main(void) {
  int x = 42;
  revive_cp* cp = revive_cp_create("installed_c");
  if (!cp || revive_cp_add_int(cp, "x", &x, 1) || revive_cp_commit(cp) || revive_cp_write(cp, 0)) {
    fprintf(stderr, "error: %s\n", revive_last_error());
    return 1;
  }
  revive_cp_destroy(cp);
  x = 0;
  cp = revive_cp_create("installed_c");
  int64_t it = 0;
  if (revive_cp_add_int(cp, "x", &x, 1) || revive_cp_commit(cp) || revive_cp_restart_if_needed(cp, &it) != 1 ||
      x != 42 || it != 1) {
    fprintf(stderr, "restart failed: %s\n", revive_last_error());
    return 1;
  }
  revive_cp_destroy(cp);
  printf("installed revive C API works\n");
  return 0;
}
