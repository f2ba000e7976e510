#!/usr/bin/env bash
# outside_file_test.sh REVIVE: a file the computation inherits from its caller, open for writing, and that
# others outside the computation write too — a pipeline script's `exec 3>>pipeline.log`, ctest's log on
# fd 3 of every test. After the checkpoint the script appends to it, and once (as logrotate's copytruncate
# does) empties it. Each restart must keep what the outsiders wrote (before: the files plugin put the
# checkpoint's contents back and the fd plugin cut the file back, erasing their lines) and must not refuse
# the emptied file (before: "shrank ... since the checkpoint"). The job's own output equals an
# uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/job.sh")
cat >"$tmp/job.sh" <<'JOB'
for i in $(seq 1 300); do echo "step $i $((i * i))"; sleep 0.01; done
JOB
bash "$tmp/job.sh" >"$tmp/ref.out"
ck=$tmp/ck
log=$tmp/pipeline.log
exec 3>>"$log"
echo "pipeline: launching the job" >&3
"$rv" launch --port "$port" --ckpt-dir "$ck" -- bash "$tmp/job.sh" >"$tmp/run.out" 2>"$tmp/launch.err" 3>&3 &
launcher=$!
for _ in $(seq 200); do [ "$(wc -l <"$tmp/run.out")" -ge 30 ] && break; sleep 0.05; done
echo "pipeline: before the checkpoint" >&3
checkpoint_and_kill "$launcher" "$tmp/job.sh"
echo "pipeline: after the checkpoint, the job was killed" >&3
# First restart: the outsiders' lines must still be there once it runs.
"$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart1.err" &
rp=$!
n0=$(wc -l <"$tmp/run.out")
for _ in $(seq 400); do [ "$(wc -l <"$tmp/run.out")" -ge $((n0 + 20)) ] && break; sleep 0.05; done
[ "$(wc -l <"$tmp/run.out")" -ge $((n0 + 20)) ] || { cat "$tmp/restart1.err"; ps -eo pid,ppid,stat,wchan:20,args --forest | grep -E "revive|job.sh|seq|sleep" | grep -v grep; fail "the restored job did not go on"; }
grep -q "after the checkpoint, the job was killed" "$log" ||
  { cat "$log"; fail "the restart erased a line an outsider wrote to $log after the checkpoint"; }
grep -q "launching the job" "$log" || fail "the restart lost the log's first line"
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >/dev/null || { cat "$tmp/restart1.err"; fail "checkpoint after the restart"; }
kill -9 "$rp" 2>/dev/null || true
pkill -9 -f "$tmp/job.sh" || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
wait "$rp" 2>/dev/null || true
# The outsider empties the log (copytruncate) and writes on: shorter than at the checkpoint.
: >"$log"
echo "pipeline: rotated" >&3
timeout 120 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart2.err" ||
  { tail "$tmp/restart2.err"; fail "restart after the outsider emptied $log"; }
echo "pipeline: done" >&3
exec 3>&-
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs from an uninterrupted run"; }
[ "$(cat "$log")" = "$(printf 'pipeline: rotated\npipeline: done')" ] || { cat -A "$log"; fail "the outsider's log after the restarts"; }
echo "outside file test passed: the outsiders' lines kept over two restarts, an emptied log accepted"
