#!/usr/bin/env python3
"""Listings of /proc and /proc/self/task opened and begun at launch (no virtual-pid table yet),
checkpointed, every process killed, restarted with virtual pids, then rewound and read whole
(progs/dircut.c, mode MODE: 'l', plus 'r' for readdir_r): the program must find itself, its child and
both its threads under the ids it knows. Before 2026-11-28 such a DIR was never marked (opendir marked
only while a table was mapped), so after the rewind the kernel's new ids came through untranslated; and
readdir_r bypassed the translation altogether.

usage: dircut_launch.py --revive R --inject I --restart RS --workdir W PROG MODE
Root only (cut_harness)."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cut_harness import Harness, children  # noqa: E402


def main():
    mode = sys.argv.pop()
    h = Harness.from_argv()
    h.prog_args = [mode]
    proc = h.launched_and_restarted(b"listing begun\n", "at launch, in the middle of the listings")
    h.gate("B")
    h.finish(proc, "started\nlisting begun\n/proc lists this process and its child\n"
             "/proc/self/task lists both threads\n")
    print("PASS: listings opened at launch showed the program's ids after a restart with virtual pids",
          flush=True)


if __name__ == "__main__":
    main()
