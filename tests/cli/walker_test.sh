#!/usr/bin/env bash
# walker_test.sh REVIVE: one walker of the node-local directories per host (files_walker.cpp). Two copies
# (`revive launch -n 2`, both on this host) each append to a file of their own in the node-local directory,
# reopening it per line (never open at a checkpoint: only the walk saves it). Before, every copy was a
# launch root and walked: both images held both files, and both copies wrote both back at restart. Now:
#  1. across the checkpoint's images each node-local file is saved exactly once (one image walks);
#  2. restarted: both copies' files and results equal an uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py")
cat >"$tmp/prog.py" <<'PROG'
import os, sys, time, zlib
idx = int(os.environ.get("REVIVE_LAUNCH_INDEX", "0"))
p = os.path.join(sys.argv[1], "copy%d.txt" % idx)
for i in range(40):
    with open(p, "a") as f:
        f.write("copy %d line %d\n" % (idx, i))
    time.sleep(0.1)
data = open(p).read()
with open("res%d.txt" % idx, "w") as f:
    f.write("copy %d: %d lines, crc %08x\n" % (idx, data.count("\n"), zlib.crc32(data.encode())))
PROG
launch_two_copies nodetmp/copy0.txt nodetmp/copy1.txt
checkpoint_and_kill "$launcher" "$tmp/prog.py"
gen=$(ls -d "$ck"/ckpt-* | sort -V | tail -1)
saved=$(for img in "$gen"/*.rimg; do "$rv" inspect --json "$img"; done | "$py" -c '
import json, sys
dec, text, n, names = json.JSONDecoder(), sys.stdin.read(), 0, []
while n < len(text):
    while n < len(text) and text[n].isspace():
        n += 1
    if n >= len(text):
        break
    j, n = dec.raw_decode(text, n)
    names += [f["path"].rsplit("/", 1)[-1] for f in j.get("files", []) if f["path"].rsplit("/", 1)[-1].startswith("copy")]
print(" ".join(sorted(names)))')
[ "$saved" = "copy0.txt copy1.txt" ] ||
  fail "the node-local files were saved as [$saved] across the images of $gen (each exactly once expected)"
# Restarted on this host with the directory as the kill left it: emptying it would not be another host
# (the pre-image records of this host apply; files removed by hand: cli.local_removed).
(cd "$tmp/run" && timeout 60 "$rv" restart --port "$port" "$ck") >"$tmp/restart.out" 2>"$tmp/restart.err" ||
  { tail -20 "$tmp/restart.err"; fail "restart"; }
for f in nodetmp/copy0.txt nodetmp/copy1.txt res0.txt res1.txt; do
  cmp "$tmp/ref/$f" "$tmp/run/$f" || { diff "$tmp/ref/$f" "$tmp/run/$f" | head; fail "$f differs after the restart"; }
done
echo "walker test passed: each node-local file saved once across the 2 copies' images ($saved), restarted, identical"
