#!/usr/bin/env bash
# busy_script_test.sh REVIVE [--fork]: a shell script that starts a new program every few milliseconds
# (command substitution: fork, pipe, exec of expr/tr, exit) is checkpointed 25 times back to back. Every
# checkpoint must succeed: one that lands on an exit, an exec or a fork is taken again by the coordinator
# instead of failing the user's `revive checkpoint`. Then everything dies by SIGKILL and the restart from
# the last generation finishes with output identical to an uninterrupted run.
set -euo pipefail
rv=$(realpath "$1")
mode=${2:-}
source "$(dirname "$0")/lib.sh"
# The files plugin's walk of /tmp, /var/tmp and /dev/shm saves every file of this user born since the
# launch: under ctest -j, other tests' Open MPI segments and large files (5.9 GB in one generation, seen
# 2026-11-27), and the restart then took longer than the test's timeout. Nothing here needs it.
export REVIVE_LOCAL_DIRS=$tmp/local
mkdir -p "$tmp/local"
cleanup_patterns=("$tmp/busy.sh")
cat >"$tmp/busy.sh" <<'PROG'
#!/bin/sh
i=0
while [ $i -lt 400 ]; do
  i=$(expr $i + 1)
  echo "line $i $(echo $i | tr 0-9 a-j)"
  sleep 0.005
done
PROG
chmod +x "$tmp/busy.sh"
sh "$tmp/busy.sh" >"$tmp/ref.out"
ck=$tmp/ck
REVIVE_LOG=2 "$rv" launch $mode --port "$port" --ckpt-dir "$ck" -- "$tmp/busy.sh" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 50); do [ -s "$tmp/run.out" ] && break; sleep 0.1; done
for k in $(seq 25); do
  "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck.out" 2>&1 ||
    { cat "$tmp/ck.out"; tail -20 "$tmp/launch.err"; fail "checkpoint $k of a busy script"; }
done
last=$(ls -d "$ck"/ckpt-* | sort -t- -k2 -n | tail -1)
[ -f "$last/MANIFEST.json" ] || fail "$last has no manifest"
echo "25 checkpoints; $(grep -c 'taking it again' "$ck/coordinator.log" || true) attempts were taken again"
kill -9 "$launcher" 2>/dev/null || true
pkill -9 -f "$tmp/busy.sh" || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
sleep 0.3
# Keep only what the restored run will write: the output up to the checkpoint is in run.out already,
# and the restored shell writes on at its recorded offset.
# Bounded, so that a restart that hangs fails here with what it and the coordinator said, not at ctest's
# timeout with nothing.
REVIVE_LOG=2 timeout 120 "$rv" restart --port "$port" "$ck" 2>"$tmp/restart.err" ||
  { tail -20 "$tmp/restart.err"; tail -20 "$ck/coordinator.log"; fail "restart"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs after restart"; }
echo "busy script test passed ($mode)"
