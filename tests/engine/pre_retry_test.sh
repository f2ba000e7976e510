#!/usr/bin/env bash
# engine.pre_retry: a checkpoint refused for now and taken again; a file the program made in between and
# deleted after the checkpoint must be back after a restart (tests/engine/progs/pre_retry.c says why).
#   pre_retry_test.sh REVIVE PROG WORKDIR
set -euo pipefail
revive=$1 prog=$2 work=$3
rm -rf "$work"; mkdir -p "$work"; cd "$work"
ck=$work/ck
fail() { echo "FAIL: $*"; for f in out err out2 err2; do [ -s $f ] && { echo "--- $f"; tail -20 $f; }; done; exit 1; }
wait_for() {  # FILE TEXT SECONDS
  for _ in $(seq 1 $(( $3 * 50 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.02; done
  fail "'$2' not in $1 after $3 s"
}
"$revive" launch --ckpt-dir "$ck" -- "$prog" "$ck/ckpt-1/MANIFEST.json" > out 2> err &
launch=$!
wait_for out ready 20
sleep 0.1
"$revive" checkpoint --ckpt-dir "$ck" > /dev/null || fail "revive checkpoint failed"
grep -q 'refused for now' err || fail "no attempt was refused for now: the test did not test the retry"
wait $launch || fail "the launched program failed"
grep -q 'deleted x' out || fail "the program did not delete x"
[ ! -e x ] || fail "x exists before the restart"
timeout 60 "$revive" restart "$ck" > out2 2> err2 || fail "the restart failed (exit $?): x was not there to delete?"
[ "$(cat out)" = "$(printf 'ready\ndeleted x')" ] || fail "the restarted program's output differs"
[ ! -e x ] || fail "x exists after the restarted program deleted it"
echo "PASS: x made during the retries came back for the restart and was deleted again"
