#!/usr/bin/env bash
# A file removed by hand between the kill and the restart (on the same host). Two copies (`launch -n 2`)
# each append a line per 0.1 s to a node-local file (nodetmp/log<i>.txt) and to a file in the working
# directory (shared<i>.txt), reopening them per line (never open at a checkpoint). The node-local files
# are saved whole by the host's one walker (files_walker.cpp); after the checkpoint each append by a
# process whose image does not hold the file keeps only the file's size (a cut-back record,
# files_pre.cpp): both shared files', and the non-walker's node-local file's. Then:
#  1. all four removed: the restart refuses, naming a shared file (its checkpoint bytes are nowhere
#     else), and writes nothing;
#  2. the shared files put back, the node-local ones still removed: the images hold those whole, so the
#     restart writes them back instead of stopping on the record; every file and result equals an
#     uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py")
cat >"$tmp/prog.py" <<'PROG'
import os, sys, time, zlib
idx = int(os.environ.get("REVIVE_LAUNCH_INDEX", "0"))
log, shared = os.path.join(sys.argv[1], "log%d.txt" % idx), "shared%d.txt" % idx
for i in range(40):
    for p in (log, shared):
        with open(p, "a") as f:
            f.write("copy %d line %d\n" % (idx, i))
    time.sleep(0.1)
data = open(log).read() + open(shared).read()
with open("res%d.txt" % idx, "w") as f:
    f.write("%d lines, crc %08x\n" % (data.count("\n"), zlib.crc32(data.encode())))
PROG
launch_two_copies shared0.txt shared1.txt
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck.out" 2>&1 || { cat "$tmp/ck.out" "$tmp/launch.err"; fail "checkpoint"; }
gen=$(ls -d "$ck"/ckpt-* | sort -V | tail -1)
# Appends after the checkpoint: the three cut-back records made.
for _ in $(seq 100); do
  [ "$(ls "$gen/.pre" 2>/dev/null | grep -c '+a$')" -ge 3 ] && break
  sleep 0.05
done
kill -9 "$launcher" 2>/dev/null || true
pkill -9 -f "$tmp/prog.py" || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
n=$(ls "$gen/.pre" | grep -c '+a$' || true)
[ "$n" -ge 3 ] || { ls -la "$gen/.pre" || true; fail "expected 3 cut-back records in $gen/.pre, found $n"; }
mkdir "$tmp/kept"
mv "$tmp/run/shared0.txt" "$tmp/run/shared1.txt" "$tmp/kept/"
rm "$tmp/run/nodetmp/log0.txt" "$tmp/run/nodetmp/log1.txt"
# 1. All gone: refused, naming a shared file; nothing written.
set +e
(cd "$tmp/run" && timeout 60 "$rv" restart --port "$port" "$ck") >"$tmp/restart1.out" 2>"$tmp/restart1.err"
rc=$?
set -e
[ "$rc" != 0 ] || fail "the restart succeeded although shared0/1.txt, whose checkpoint bytes only they held, were removed"
grep -q "shared[01].txt' cannot be applied" "$tmp/restart1.err" || { cat "$tmp/restart1.err"; fail "the refusal does not name a shared file"; }
[ -z "$(ls "$tmp/run/nodetmp")" ] && [ ! -e "$tmp/run/shared0.txt" ] || fail "the refused restart wrote files"
# 2. The shared files back, the node-local ones still removed: restarted, identical.
mv "$tmp/kept/shared0.txt" "$tmp/kept/shared1.txt" "$tmp/run/"
(cd "$tmp/run" && timeout 60 "$rv" restart --port "$port" "$ck") >"$tmp/restart2.out" 2>"$tmp/restart2.err" ||
  { tail -20 "$tmp/restart2.err"; fail "restart with the node-local files removed"; }
grep -q "log[01].txt' was removed since the checkpoint" "$tmp/restart2.err" || { cat "$tmp/restart2.err"; fail "no note names the removed node-local file"; }
for f in nodetmp/log0.txt nodetmp/log1.txt shared0.txt shared1.txt res0.txt res1.txt; do
  cmp "$tmp/ref/$f" "$tmp/run/$f" || { diff "$tmp/ref/$f" "$tmp/run/$f" | head; fail "$f differs after the restart"; }
done
echo "local_removed test passed: refused while the shared files were gone ($(grep -o "cannot be applied: [^(]*" "$tmp/restart1.err" | head -1)); the node-local files removed by hand came back from the images, identical"
