#!/usr/bin/env bash
# interval_heartbeat.sh MPIEXEC PROGRAM DIR: 3 ranks of mpi_interval_test under REVIVE_CP_INTERVAL with
# heartbeat files. While it runs, every rank's heartbeat mtime must advance; while its processes are
# SIGSTOPped (found by the pid in their heartbeat files), none may; after SIGCONT the run must finish with
# every rank having written the same versions. Then once more with REVIVE_CP_INTERVAL=auto.
set -euo pipefail
mpiexec=$1 prog=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
hb=$dir/hb
fail() { echo "FAIL: $*"; [[ -n ${pids:-} ]] && kill -CONT $pids 2>/dev/null; kill "$run" 2>/dev/null; cat "$dir/out" >&2; exit 1; }
mtimes() { for r in 0 1 2; do stat -c %.9Y "$hb/rank.$r"; done | tr '\n' ' '; }

REVIVE_CP_INTERVAL=0.15 REVIVE_HEARTBEAT_DIR=$hb REVIVE_VERBOSE=1 \
  timeout 60 "$mpiexec" -n 3 --oversubscribe --mca mpi_yield_when_idle 1 "$prog" "$dir/cp" 1600 >"$dir/out" 2>&1 &
run=$!
for _ in $(seq 100); do
  [[ -s $hb/rank.0 && -s $hb/rank.1 && -s $hb/rank.2 ]] && break
  sleep 0.1
done
[[ -s $hb/rank.2 ]] || fail "no heartbeat files in $hb after 10 s"
pids=$(for r in 0 1 2; do sed -n 's/^pid //p' "$hb/rank.$r"; done | tr '\n' ' ')
grep -q '^host ' "$hb/rank.1" || fail "rank.1 names no host: $(cat "$hb/rank.1")"

before=$(mtimes)
sleep 2.3
running=$(mtimes)
for r in 1 2 3; do
  a=$(echo "$before" | cut -d' ' -f$r) b=$(echo "$running" | cut -d' ' -f$r)
  awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > a) }' || fail "rank $((r - 1))'s heartbeat did not advance while running ($a -> $b)"
done

kill -STOP $pids || fail "the ranks ($pids) ended before they could be stopped"
sleep 0.2  # a touch already inside the kernel lands before the stop
stopped=$(mtimes)
sleep 2.5
[[ $(mtimes) == "$stopped" ]] || fail "heartbeats advanced while the ranks were stopped: $stopped -> $(mtimes)"
kill -CONT $pids
pids=

wait "$run" || fail "the run failed (exit $?)"
grep -q 'interval: PASS' "$dir/out" || fail "ranks disagree"
grep -m2 'next write at' "$dir/out" || fail "no verbose interval line"
grep 'wrote at iterations' "$dir/out"
# The heartbeat content names the newest version.
grep -q "^version $(grep -c 'wrote version' "$dir/out")\$" "$hb/rank.0" || fail "rank.0 does not name the last version: $(cat "$hb/rank.0")"
# auto: Daly's interval from the agreed cost and REVIVE_MTBF, the same decisions on every rank too.
rm -rf "$dir/cp"
REVIVE_CP_INTERVAL=auto REVIVE_MTBF=5 REVIVE_VERBOSE=1 \
  timeout 60 "$mpiexec" -n 3 --oversubscribe --mca mpi_yield_when_idle 1 "$prog" "$dir/cp" 400 >"$dir/out" 2>&1 ||
  fail "the auto run failed"
grep -q 'interval: PASS' "$dir/out" || fail "ranks disagree (auto)"
grep -m1 "Daly's interval for C = .*M = REVIVE_MTBF = 5 s" "$dir/out" || fail "no verbose auto line"
grep 'wrote at iterations' "$dir/out"
echo "interval_heartbeat: PASS"
rm -rf "$dir"
