#!/usr/bin/env bash
# stderr_warn_test.sh REVIVE: a warning revive writes during a checkpoint must not change what the
# processes save of the stderr file they share. Three processes (a shell and two writers) share one
# stderr file; a file under the node-local directory is larger than REVIVE_FILES_MAX_MB, so every
# process's files plugin warns about it in its save. Those lines used to go straight into the shared
# stderr, between one process's save and the next, so the processes recorded different sizes and the
# restart refused the file ("stderr shrank from N to M bytes"). They now wait for the resume
# (src/inject/stderr_defer.cpp). A checkpoint (each process warns once), kill, restart; the output must equal an uninterrupted
# run's and the warning must have reached stderr.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/writers.sh")
mkdir -p "$tmp/local"
cat >"$tmp/writers.sh" <<'PROG'
#!/bin/sh
w() { i=0; while [ $i -lt 60 ]; do i=$((i + 1)); echo "$1 $i"; echo "$1 err $i" >&2; sleep 0.05; done; }
w a & w b & wait
PROG
chmod +x "$tmp/writers.sh"
cd "$tmp"
"$tmp/writers.sh" 2>/dev/null | sort >"$tmp/ref.out"
# REVIVE_LOCAL_WALK=birth: big.bin is made by this script, outside the computation, so the creation log
# (the default) rightly leaves it out; the birth-time rule takes it, which is all this test needs.
export REVIVE_LOCAL_DIRS=$tmp/local REVIVE_FILES_MAX_MB=1 REVIVE_LOCAL_WALK=birth
ck=$tmp/ck
"$rv" launch --port "$port" --ckpt-dir "$ck" -- "$tmp/writers.sh" >"$tmp/run.out" 2>"$tmp/run.err" &
launcher=$!
sleep 0.4
head -c 2200000 /dev/zero >"$tmp/local/big.bin"  # born after the launch: the walk finds it
sleep 0.1
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >/dev/null || fail "checkpoint"
sleep 0.4
kill -9 "$launcher" 2>/dev/null || true
pkill -9 -f "$tmp/writers.sh" || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
sleep 0.3
grep -q "larger than 1 MiB" "$tmp/run.err" || { cat "$tmp/run.err" | head; fail "no size warning in stderr: the test did not provoke one"; }
"$rv" restart --port "$port" "$ck" 2>"$tmp/restart.err" || { tail -20 "$tmp/restart.err"; fail "restart"; }
sort "$tmp/run.out" | cmp - "$tmp/ref.out" || fail "output differs after restart"
echo "stderr_warn test passed"
