/* no_userns PROG [ARGS...]: runs PROG where user namespaces are disabled, as on clusters that turn them
 * off: a seccomp filter (inherited by every descendant, and kept across exec with no_new_privs) makes
 * unshare() and clone() with CLONE_NEWUSER fail with EPERM, and clone3() fail with ENOSYS (its flags
 * are in memory a filter cannot read; glibc then falls back to clone() for threads and fork). So
 * neither a user+pid namespace nor clone3 set_tid can recreate pids: revive restart must use virtual
 * pids. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: no_userns PROG [ARGS...]\n");
    return 2;
  }
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
      /* unshare(flags) and clone(flags, ...): flags are the first argument (low 32 bits). */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    perror("no_userns: PR_SET_NO_NEW_PRIVS");
    return 2;
  }
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    perror("no_userns: seccomp");
    return 2;
  }
  /* Check the filter: a user namespace must now be refused. */
  if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) {
    fprintf(stderr, "no_userns: unshare(CLONE_NEWUSER) was not refused with EPERM\n");
    return 2;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "no_userns: exec %s: %s\n", argv[1], strerror(errno));
  return 127;
}
