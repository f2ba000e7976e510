/* ns_enter NS CMD [ARGS...]: the test stand-in for `ssh NS CMD` by an ordinary user. Installed setuid
 * root by tests/hosts/migrate_test.py --user (only for the test, in a directory of its own, removed after):
 * joins the network namespace /run/netns/NS (made by scripts/netns.sh as root), then gives up root for
 * good (the caller's real uid and gid) before it execs CMD, as sshd does for a login. NS must be a plain
 * name; nothing else of the caller's is touched. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ns_enter NS CMD [ARGS...]\n");
    return 2;
  }
  for (const char* p = argv[1]; *p; ++p)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) {
      fprintf(stderr, "ns_enter: %s: not a namespace name\n", argv[1]);
      return 2;
    }
  char path[256];
  snprintf(path, sizeof path, "/run/netns/%s", argv[1]);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "ns_enter: %s: %s\n", path, strerror(errno));
    return 2;
  }
  close(fd);
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0 || (uid != 0 && setuid(0) == 0)) {
    fprintf(stderr, "ns_enter: cannot give up root: %s\n", strerror(errno));
    return 2;
  }
  execvp(argv[2], argv + 2);
  fprintf(stderr, "ns_enter: %s: %s\n", argv[2], strerror(errno));
  return 127;
}
