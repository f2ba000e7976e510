#!/usr/bin/env bash
# restart_newport_test.sh REVIVE: a restart on another coordinator port than the launch's (`revive restart
# --port Q`, and `revive restart DIR` with no port at all, which picks its own). A shell script that
# starts a program (fork + exec of `sleep`) at every step after the restart must finish with the output of
# an uninterrupted run. Before the fix the exec'ed children inherited the restored shell's environment,
# which named the dead launch's coordinator: each `sleep 0.05` retried that port and never finished.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cd "$tmp"
cleanup_patterns=("newport-loop-$port")
printf 'i=0; while [ $i -lt 40 ]; do echo $i; i=$((i+1)); sleep 0.05; done\n' > loop.sh
seq 0 39 > want.txt
run_once() {  # run_once RESTART_ARGS...: launch, checkpoint, SIGKILL, restart with those arguments
  rm -rf ck out.txt
  "$rv" launch --port "$port" --ckpt-dir "$tmp/ck" -- bash loop.sh "newport-loop-$port" > out.txt 2> launch.err &
  local launcher=$!
  for _ in $(seq 100); do [ "$(wc -l < out.txt)" -ge 5 ] && break; sleep 0.05; done
  "$rv" checkpoint --port "$port" --ckpt-dir "$tmp/ck" > ck.out 2>&1 || { cat ck.out launch.err; fail "checkpoint"; }
  pkill -9 -f "newport-loop-$port" || true
  wait "$launcher" 2>/dev/null || true
  local before
  before=$(wc -l < out.txt)
  [ "$before" -lt 40 ] || fail "the script ended before the kill; make it longer"
  local rc=0
  timeout 60 "$rv" restart "$@" "$tmp/ck" > rs.out 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    cat rs.out; pkill -9 -f "newport-loop-$port" || true
    fail "revive restart $* exited $rc (124: did not finish in 60 s) with $(wc -l < out.txt) lines written"
  fi
  diff want.txt out.txt > /dev/null || { diff want.txt out.txt | head; fail "output after restart $* differs"; }
  echo "restart $*: identical after a kill at line $before"
}
run_once --port $((port + 1))
run_once
echo "restart on a new port test passed"
