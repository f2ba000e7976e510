#!/usr/bin/env python3
"""side_by_side.py DRIVER ARGS...: runs the tree driver twice at once, with --workdir W becoming W-1 and
W-2, so two trees are launched, checkpointed, killed and restarted (with virtual pids) side by side; the
second tree's recorded pids may well be the first one's new kernel pids."""
import subprocess, sys

drv, args = sys.argv[1], sys.argv[2:]
procs = []
for n in (1, 2):
    a = list(args)
    a[a.index("--workdir") + 1] += "-%d" % n
    procs.append(subprocess.Popen([sys.executable, drv] + a, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
rc = 0
for n, p in enumerate(procs, 1):
    out = p.communicate()[0].decode(errors="replace")
    print("--- tree %d (rc %d)\n%s" % (n, p.returncode, out), flush=True)
    rc = rc or p.returncode
sys.exit(rc)
