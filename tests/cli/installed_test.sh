#!/usr/bin/env bash
# installed_test.sh BUILD_DIR: the product as a user gets it. `cmake --install` into an empty prefix, the
# prefix then moved elsewhere (relocatable), and from there, in a clean environment (env -i, no REVIVE_*
# variables, a working directory outside the build tree): `revive <cmd> --help` for every command; a
# process tree (a shell script with a background child writing to the same file) launched, checkpointed
# at a random moment, SIGKILLed and restarted, its output compared byte for byte with an uninterrupted run,
# all with the default checkpoint directory (./revive-ckpt): `revive restart` and `revive ls` without one.
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 12000))
cleanup() { pkill -9 -f "$tmp/" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
cmake --install "$build" --prefix "$tmp/first" --component revive >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
mv "$tmp/first" "$tmp/prefix"  # relocated: nothing may remember where it was installed
rv=$tmp/prefix/bin/revive
for f in bin/revive lib/revive/librevive_inject.so lib/revive/revive-restart; do
  [ -f "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
run() { env -i PATH=/usr/bin:/bin HOME="$tmp" "$@"; }
for c in "" launch checkpoint restart status kill inspect coordinator; do
  run "$rv" $c --help >"$tmp/help.txt" || { echo "FAIL: revive $c --help"; cat "$tmp/help.txt"; exit 1; }
  grep -q "Usage" "$tmp/help.txt" || { echo "FAIL: revive $c --help has no Usage line"; exit 1; }
done

# The program: a script and its background child print numbered lines to the stdout they share (one open
# file: the launch's stdout redirected to a file).
mkdir -p "$tmp/work"
cat >"$tmp/work/tree.sh" <<'PROG'
#!/bin/sh
( i=0; while [ $i -lt 40 ]; do echo "child $i"; i=$((i+1)); sleep 0.05; done ) &
i=0; while [ $i -lt 40 ]; do echo "parent $i"; i=$((i+1)); sleep 0.05; done
wait
echo done
PROG
chmod +x "$tmp/work/tree.sh"
cd "$tmp/work"
run sh ./tree.sh >"$tmp/ref.out"

run "$rv" launch --port "$port" -- ./tree.sh >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
sleep "0.$((3 + RANDOM % 6))"
run "$rv" checkpoint --port "$port" >"$tmp/ckpt.log" 2>&1 ||
  { echo "FAIL: checkpoint"; cat "$tmp/ckpt.log" "$tmp/launch.err"; exit 1; }
# Every process of the computation and the launcher die at once.
pkill -9 -f "$tmp/work/tree.sh" || true
kill -9 "$launcher" 2>/dev/null || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "revive.*--port $port" 2>/dev/null || true
sleep 0.3
run "$rv" ls >"$tmp/ls.out" 2>&1 || { echo "FAIL: revive ls (no directory: ./revive-ckpt)"; cat "$tmp/ls.out"; exit 1; }
grep -q "generation 1\|ckpt-1\|^ *1 " "$tmp/ls.out" || { echo "FAIL: revive ls does not show generation 1"; cat "$tmp/ls.out"; exit 1; }
run "$rv" restart --port "$port" 2>"$tmp/restart.err" ||
  { echo "FAIL: restart"; cat "$tmp/restart.err"; exit 1; }
# The restored processes write on at the checkpoint's offset of the same file (the lines the killed run
# wrote after the checkpoint are written over). Parent and child interleave differently from run to run,
# so the lines are compared sorted: none lost, none twice; "done" comes last in both.
if ! cmp -s <(sort "$tmp/ref.out") <(sort "$tmp/run.out") || [ "$(tail -1 "$tmp/run.out")" != done ]; then
  echo "FAIL: output differs from the uninterrupted run"; diff <(sort "$tmp/ref.out") <(sort "$tmp/run.out") | head
  exit 1
fi
echo "installed revive: help, launch, checkpoint, SIGKILL, ls, restart (default directory) from a relocated prefix: passed"
