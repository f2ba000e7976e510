#!/usr/bin/env bash
# hang_refuse_test.sh REVIVE: a process that does not answer a checkpoint within the phase timeout (here:
# SIGSTOPped) fails that generation naming it, and is dropped by the coordinator while it may still run.
# Every later checkpoint is then refused with a message naming it, instead of completing a generation
# without a live process (before the fix, the next checkpoint published one). The last complete
# generation restarts after SIGKILL and the output equals an uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.sh" "sleep 77.5")
cat >"$tmp/prog.sh" <<'PROG'
#!/bin/sh
sleep 77.5 &
i=0; while [ $i -lt 60 ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done
kill $! 2>/dev/null
PROG
chmod +x "$tmp/prog.sh"
sh "$tmp/prog.sh" >"$tmp/ref.out"
export REVIVE_LOCAL_DIRS=
ck=$tmp/ck
REVIVE_PHASE_TIMEOUT=2 "$rv" launch --port "$port" --ckpt-dir "$ck" -- "$tmp/prog.sh" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 50); do [ -s "$tmp/run.out" ] && break; sleep 0.1; done
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck1.out" 2>&1 ||
  { cat "$tmp/ck1.out"; tail -20 "$tmp/launch.err"; fail "first checkpoint"; }
hung=$(pgrep -f "^sleep 77.5") || fail "no sleep 77.5"
kill -STOP "$hung"
if "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck2.out" 2>&1; then fail "a checkpoint with a stopped process succeeded"; fi
grep -q "pid $hung .*did not answer phase" "$tmp/ck2.out" || { cat "$tmp/ck2.out"; fail "the failure does not name the silent process"; }
if "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck3.out" 2>&1; then
  cat "$tmp/ck3.out"; fail "a checkpoint without the dropped live process succeeded"
fi
grep -q "refused: .*pid $hung .*was dropped because it did not answer" "$tmp/ck3.out" || { cat "$tmp/ck3.out"; fail "the refusal does not name the dropped process"; }
[ "$(ls -d "$ck"/ckpt-*/MANIFEST.json | wc -l)" = 1 ] || { ls "$ck"; fail "a generation besides the first is complete"; }
kill -CONT "$hung"
kill -9 "$launcher" 2>/dev/null || true
pkill -9 -f "$tmp/prog.sh" || true
pkill -9 -f "sleep 77.5" || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
sleep 0.3
"$rv" restart --port "$port" "$ck" 2>"$tmp/restart.err" || { tail -20 "$tmp/restart.err"; fail "restart"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs after restart"; }
echo "hang refusal test passed: generation 2 failed naming pid $hung, generation 3 refused, generation 1 restarted"
