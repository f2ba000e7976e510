#!/usr/bin/env python3
"""A program's SIGUSR1 (sent with sigqueue by its child) and the checkpoint signal delivered together
(progs/sigcut.c): the checkpoint is taken with the program's thread at the first instruction of the
signal plugin's handler entry, the siginfo holding the child's kernel pid of that incarnation. Restarted
from there with virtual pids, the program's SA_SIGINFO handler must see the child's pid as fork() gave it,
not the old kernel pid read with the new incarnation's table.

usage: sigcut.py --revive R --inject I --restart RS --workdir W PROG
Root only (ns_last_pid)."""
import os, signal, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cut_harness import Harness, children, fail  # noqa: E402


def main():
    h = Harness.from_argv()
    ckpt_bit = 1 << (signal.SIGRTMAX - 2 - 1)  # the engine's default checkpoint signal, SIGRTMAX-2
    proc, pid = h.to_incarnation_2(b"SIGUSR1 pending\n")
    ck_proc = h.checkpoint()
    h.wait_pending(pid, ck_proc, ckpt_bit, "the checkpoint signal did not become pending in the program")
    h.gate("B")  # the program unblocks both signals
    h.finish_checkpoint(ck_proc, "taken at the handler's entry")
    h.kill_all(proc, children(proc.pid))
    proc = h.restart(2)  # incarnation 3: the siginfo in hand holds incarnation 2's kernel pid
    h.gate("C")
    h.finish(proc, "started\nchild has a virtual pid of its own\nSIGUSR1 pending\nthe handler saw the child's pid\n")
    print("PASS: a siginfo delivered with the checkpoint signal was read with its own incarnation's ids",
          flush=True)


if __name__ == "__main__":
    main()
