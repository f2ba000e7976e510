#!/usr/bin/env bash
# exec_ready_test.sh REVIVE: an exec'd image connects to the coordinator before its engine is ready (the
# proctree plugin adopts its predecessor's place during the library's initialisation). A checkpoint that
# starts then sends it PHASE suspend at once; that frame must be served when the engine becomes ready,
# or the checkpoint waits for the coordinator's phase timeout. REVIVE_TEST_READY_DELAY_MS widens the
# window to 300 ms; a shell script starts a long-lived `sleep` (fork, exec) every 100 ms while 10
# checkpoints are taken back to back, each of which must answer within 10 s (an image that never serves
# its frame holds the checkpoint until it exits: 12 s). Then kill, restart, output identical. 50 lines: the
# delay stays in the restored processes' environment, so each line takes ~0.4 s, also after the restart.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/execs.sh" "$tmp/ref.sh" "sleep 12.25")
cat >"$tmp/execs.sh" <<'PROG'
#!/bin/sh
i=0
while [ $i -lt 50 ]; do
  i=$((i + 1))
  sleep 12.25 &
  echo "line $i"
  sleep 0.1
done
PROG
chmod +x "$tmp/execs.sh"
# The uninterrupted run beside the launched one (it sleeps 5 s in all; one after the other made the test 5 s
# longer). A copy of the script: the launched job's cleanup below kills execs.sh by name. Its own `sleep`s
# are killed with the launched job's (nothing waits for them).
cp "$tmp/execs.sh" "$tmp/ref.sh"
sh "$tmp/ref.sh" >"$tmp/ref.out" &
ref=$!
ck=$tmp/ck
REVIVE_TEST_READY_DELAY_MS=300 "$rv" launch --port "$port" --ckpt-dir "$ck" -- "$tmp/execs.sh" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 50); do [ -s "$tmp/run.out" ] && break; sleep 0.1; done
for k in $(seq 10); do
  timeout 10 "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck.out" 2>&1 \
    || { cat "$tmp/ck.out"; "$rv" status --port "$port" --ckpt-dir "$ck" || true; fail "checkpoint $k did not complete"; }
done
kill -9 "$launcher" 2>/dev/null || true
pkill -9 -f "$tmp/execs.sh" || true
pkill -9 -f "sleep 12.25" || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
sleep 0.3
wait "$ref" || fail "the reference run failed"
pkill -9 -f "sleep 12.25" || true
REVIVE_TEST_READY_DELAY_MS=300 "$rv" restart --port "$port" "$ck" 2>"$tmp/restart.err" || { tail -20 "$tmp/restart.err"; fail "restart"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs after restart"; }
echo "exec-before-ready test passed: 10 checkpoints while images exec'd every 100 ms"
