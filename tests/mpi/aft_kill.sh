#!/usr/bin/env bash
# aft_kill.sh EXE replace|shrink DIR RUNS: one uninterrupted run of EXE (4 ranks), then RUNS runs in which
# one random rank is SIGKILLed at a random moment; each must finish by itself (in-job recovery) with
# stdout identical to the uninterrupted run's.
# Open MPI only: --enable-recovery keeps mpirun from killing the survivors; TCP because Open MPI's shared
# memory transport cannot reach the spawned replacement; loopback so no other interface is tried.
set -u
exe=$1 mode=$2 dir=$3 runs=${4:-1}
iters=${AFT_ITERS:-60}
mpirun=(mpirun -np 4 --oversubscribe --enable-recovery --mca orte_abort_on_non_zero_status 0
        --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir"; mkdir -p "$dir/ref/pids"
t0=$(date +%s.%N)
timeout 60 "${mpirun[@]}" "$exe" "$dir/ref" "$mode" "$iters" >"$dir/ref.out" 2>"$dir/ref.err" ||
  { cat "$dir/ref.err"; fail "uninterrupted run failed"; }
echo "uninterrupted: $(cat "$dir/ref.out") ($(echo "$(date +%s.%N) - $t0" | bc) s)"
[ -s "$dir/ref.out" ] || fail "uninterrupted run printed nothing"
for ((k = 1; k <= runs; k++)); do
  d=$dir/run$k; mkdir -p "$d/pids"
  t0=$(date +%s.%N)
  timeout 60 "${mpirun[@]}" "$exe" "$d" "$mode" "$iters" >"$d/out" 2>"$d/err" &
  job=$!
  # Wait for the 4 ranks, then kill one of them at a random moment of the run (0.2 - 1.0 s into it).
  for ((w = 0; w < 200; w++)); do [ "$(ls "$d/pids" | wc -l)" -ge 4 ] && break; sleep 0.05; done
  [ "$(ls "$d/pids" | wc -l)" -ge 4 ] || { kill $job; fail "run $k: ranks did not start"; }
  sleep "0.$((2 + RANDOM % 9))"
  victim=$(ls "$d/pids" | shuf -n 1)
  kill -9 "$victim" 2>/dev/null || echo "run $k: rank pid $victim had already finished"
  wait $job; rc=$?
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ $rc -ne 0 ] || ! cmp -s "$dir/ref.out" "$d/out"; then
    echo "--- stderr"; tail -20 "$d/err"; echo "--- stdout"; cat "$d/out"
    fail "run $k (victim pid $victim, mpirun rc $rc, $secs s): failed or output differs from the uninterrupted run"
  fi
  grep -q "recovery 1:" "$d/err" || { tail -20 "$d/err"; fail "run $k: no recovery reported"; }
  echo "run $k: victim pid $victim, mpirun rc $rc, $secs s: same output; $(grep -h -o 'recovery 1:.*' "$d/err" | head -1)"
done
echo PASS
