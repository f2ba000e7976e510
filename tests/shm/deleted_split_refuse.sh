#!/usr/bin/env bash
# deleted_split_refuse.sh REVIVE PROG: issue 13's deleted file that the parent maps shared while its
# child only holds it open (progs/deleted_split.c). A restart would give the child's descriptor a copy
# of its own (checked on main before this refusal: "parent: lost the child"), so the checkpoint fails at
# once instead, naming the child, its fd, the file and the process that maps it; nothing is published
# and the program runs on to the uninterrupted run's end.
set -euo pipefail
rv=$(realpath "$1")
prog=$(realpath "$2")
source "$(dirname "$0")/../cli/lib.sh"
cd "$tmp"
"$rv" launch --port "$port" --ckpt-dir "$tmp/ck" -- "$prog" 400 >"$tmp/out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 100); do grep -q "^child 1 got" "$tmp/out" 2>/dev/null && break; sleep 0.1; done
grep -q "^child 1 got" "$tmp/out" || { cat "$tmp/launch.err"; fail "the program did not start"; }
rc=0
"$rv" checkpoint --port "$port" --ckpt-dir "$tmp/ck" >"$tmp/ck.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || { cat "$tmp/ck.out"; fail "the checkpoint succeeded (the child's descriptor would be a copy)"; }
want="checkpoint refused: process [0-9]+ \(shm_deleted_spl[a-z]*\) fd [0-9]+ is the deleted file '.*split\.[0-9]+\.tmp \(deleted\)', which process [0-9]+ \(its fd [0-9]+\) maps shared"
grep -Eq "$want" "$tmp/ck.out" || { cat "$tmp/ck.out"; fail "the failure does not name the child, its fd, the file and the mapping process"; }
! ls "$tmp"/ck/ckpt-*/MANIFEST.json >/dev/null 2>&1 || fail "a generation was published"
wait "$launcher" || { tail -3 "$tmp/out"; fail "the program did not finish after the refused checkpoint"; }
tail -1 "$tmp/out" | grep -qx "done 0" || { tail -3 "$tmp/out"; fail "the program did not end as an uninterrupted run"; }
echo "refused: $(grep -Eo "$want" "$tmp/ck.out" | head -1)"
echo "deleted split refusal test passed"
