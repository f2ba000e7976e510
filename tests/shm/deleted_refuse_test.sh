#!/usr/bin/env bash
# deleted_refuse_test.sh REVIVE INJECT PROG: issue 13, nothing silently substituted. A deleted file one
# process maps shared and another holds open, in the two ways revive cannot restore as one object
# (progs/deleted_mapped.c: "closed", the mapping process closed every descriptor of it; "part", it maps
# only a part of it): `revive checkpoint` must fail naming the holder process, its fd, the file and the
# mapping process, publish nothing, and the program must run on to its end, every turn seen (before
# 2026-11-27 the checkpoint succeeded and the holder's descriptor came back as a copy apart from the
# mapping). Then a standalone checkpoint (the checkpoint signal) of the "part" parent, which maps a part
# and holds the file open itself: refused the same way, no image written.
set -euo pipefail
rv=$(realpath "$1")
inject=$(realpath "$2")
prog=$(realpath "$3")
source "$(dirname "$0")/../cli/lib.sh"
export REVIVE_INJECT_LIB=$inject
unset REVIVE_PORT REVIVE_CKPT_DIR REVIVE_SECRET_FILE
rounds=400
cleanup_patterns=("$prog (closed|part) $rounds")
cd "$tmp"

# finished OUT: the run went on to its end, every turn taken.
finished() {
  local out=$1
  for _ in $(seq 300); do grep -q '^done' "$out" && break; sleep 0.1; done
  grep -qx 'done 0' "$out" || { tail -5 "$out"; fail "$out: the program did not end well"; }
  [ "$(grep -c '^parent [0-9]*$' "$out")" = "$rounds" ] && [ "$(grep -c '^child [0-9]* got' "$out")" = "$rounds" ] ||
    fail "$out: turns missing"
}

# check MODE REGEX: launch, checkpoint, expect the refusal (@P@ parent pid, @C@ child pid, @F@ fd, @N@ file).
check() {
  local mode=$1 want=$2 ck=$tmp/ck-$1
  "$rv" launch --port "$port" --ckpt-dir "$ck" -- "$prog" "$mode" "$rounds" >"out-$mode" 2>"launch-$mode.err" &
  local launcher=$!
  for _ in $(seq 100); do grep -q "^ready" "out-$mode" 2>/dev/null && break; sleep 0.05; done
  local p c f n
  read -r _ p c f n < <(grep '^ready' "out-$mode") || { cat "launch-$mode.err"; fail "$mode: the program did not start"; }
  local rc=0
  "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"ck-$mode.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { cat "ck-$mode.out"; fail "$mode: the checkpoint succeeded"; }
  want=${want//@P@/$p}; want=${want//@C@/$c}; want=${want//@F@/$f}; want=${want//@N@/$n}
  grep -Eq "$want" "ck-$mode.out" ||
    { cat "ck-$mode.out"; fail "$mode: the failure does not name the holder, fd $f, file $n and the mapping process $p"; }
  ! ls "$ck"/ckpt-*/MANIFEST.json >/dev/null 2>&1 || fail "$mode: a generation was published"
  wait "$launcher" || true
  finished "out-$mode"
  echo "$mode: $(grep -Eo "$want" "ck-$mode.out" | head -1)"
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
  sleep 0.3
}
file="'[^']*/@N@ \(deleted\)' \(8192 bytes\)"
check closed "checkpoint refused: process @C@ \([^)]*\) fd @F@ is the deleted file $file, which process @P@ \([^)]*\) maps shared \(file offset 0, 8192 bytes\) while no process both maps it whole and holds it open"
# Either process may be the first to refuse: the parent (its own part), or the child (the parent's part).
check part "checkpoint refused: process (@P@ \([^)]*\) fd @F@ is the deleted file $file, which this process|@C@ \([^)]*\) fd @F@ is the deleted file $file, which process @P@ \([^)]*\)) maps shared \(file offset 4096, 4096 bytes\)"

LD_PRELOAD=$inject REVIVE_CKPT_DIR=$tmp/lone "$prog" part "$rounds" >lone.out 2>lone.err &
lone=$!
for _ in $(seq 100); do grep -q '^ready' lone.out 2>/dev/null && break; sleep 0.05; done
read -r _ p c f n < lone.out
kill -s SIGRTMAX-2 "$p"
wait "$lone" || true
grep -Eq "checkpoint refused: process $p \([^)]*\) fd $f is the deleted file '[^']*/$n \(deleted\)' \(8192 bytes\), which this process maps shared \(file offset 4096, 4096 bytes\) only in part" lone.err ||
  { cat lone.err; fail "the standalone checkpoint did not refuse fd $f"; }
! ls lone/ckpt-*/*.rimg >/dev/null 2>&1 || fail "the standalone checkpoint wrote an image"
finished lone.out
echo "standalone: refused fd $f"
echo "deleted mapping refusal test passed"
