#!/usr/bin/env python3
"""A waitpid() blocked in the kernel and interrupted by the program's SIGUSR1 handler (SA_RESTART), which
spins in user space while the checkpoint is taken (progs/handlercut.c): the engine finds the thread in the
handler, not at the call, and the kernel makes the call again once the handler returns. Restarted from
there with virtual pids, waitpid's answer holds the new incarnation's kernel pid: the program must get its
child's pid as fork() gave it, not that kernel pid read with the old incarnation's ids.

usage: handlercut.py --revive R --inject I --restart RS --workdir W PROG
Root only (ns_last_pid)."""
import os, signal, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cut_harness import Harness, children, fail  # noqa: E402

SYS_WAIT4 = 61


def main():
    h = Harness.from_argv()
    proc, pid = h.to_incarnation_2(b"child has a virtual pid of its own\n")
    deadline = time.time() + 60
    while open("/proc/%d/syscall" % pid).read().split()[0] != str(SYS_WAIT4):
        if time.time() > deadline:
            fail("the program did not block in wait4", h.work)
        time.sleep(0.01)
    os.kill(pid, signal.SIGUSR1)
    h.wait_line(b"in the handler\n", proc)
    h.finish_checkpoint(h.checkpoint(), "taken in the handler over waitpid")
    h.kill_all(proc, children(proc.pid))
    proc = h.restart(2)  # incarnation 3: waitpid is made again, its answer in this incarnation's ids
    h.gate("C")
    h.gate("D")
    h.finish(proc, "started\nchild has a virtual pid of its own\nin the handler\n"
             "waitpid gave the child's pid, exit status 11\n")
    print("PASS: a call a handler interrupted, made again after the restart, was read with the new ids",
          flush=True)


if __name__ == "__main__":
    main()
