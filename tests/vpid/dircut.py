#!/usr/bin/env python3
"""Listings of /proc and /proc/self/task begun in a restored tree (virtual pids), checkpointed with the
rest of each listing already in glibc's DIR buffer (the old incarnation's kernel ids), restarted and
finished there (progs/dircut.c): the program must find itself, its child and both its threads, and the
listing must not hold the old incarnation's kernel pid of the program.

usage: dircut.py --revive R --inject I --restart RS --workdir W PROG
Root only (cut_harness)."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cut_harness import Harness, children, fail  # noqa: E402


def main():
    h = Harness.from_argv()
    proc, pid = h.to_incarnation_2(b"listing begun\n")
    h.finish_checkpoint(h.checkpoint(), "in the middle of the listings")
    h.kill_all(proc, children(proc.pid))
    proc = h.restart(2)  # incarnation 3: the buffers hold incarnation 2's kernel ids
    h.gate("B")
    h.finish(proc, "started\nlisting begun\n/proc lists this process and its child\n"
             "/proc/self/task lists both threads\n")
    listed = open(os.path.join(h.gates, "listed")).read().split("\n")
    if "proc %d" % pid in listed and not os.path.exists("/proc/%d" % pid):
        fail("/proc listed the old incarnation's kernel pid %d of the program" % pid, h.work)
    print("PASS: listings begun before the checkpoint showed the program's ids after the restart", flush=True)


if __name__ == "__main__":
    main()
